// A pty's termios and window size in the image's words (image/model.hpp kPty*).
#pragma once

#include <sys/ioctl.h>
#include <termios.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "image/model.hpp"

namespace ckpt::tty {

inline void store_termios(const termios& t, const winsize& w, std::vector<uint64_t>* p) {
  (*p)[image::kPtyIflag] = t.c_iflag;
  (*p)[image::kPtyOflag] = t.c_oflag;
  (*p)[image::kPtyCflag] = t.c_cflag;
  (*p)[image::kPtyLflag] = t.c_lflag;
  (*p)[image::kPtyLine] = t.c_line;
  static_assert(sizeof t.c_cc == 32);
  std::memcpy(&(*p)[image::kPtyCc], t.c_cc, 32);
  (*p)[image::kPtyWinsize] = uint64_t(w.ws_row) | uint64_t(w.ws_col) << 16 |
                             uint64_t(w.ws_xpixel) << 32 | uint64_t(w.ws_ypixel) << 48;
}

inline void load_termios(const std::vector<uint64_t>& p, termios* t, winsize* w) {
  *t = {};
  t->c_iflag = tcflag_t(p[image::kPtyIflag]);
  t->c_oflag = tcflag_t(p[image::kPtyOflag]);
  t->c_cflag = tcflag_t(p[image::kPtyCflag]);
  t->c_lflag = tcflag_t(p[image::kPtyLflag]);
  t->c_line = cc_t(p[image::kPtyLine]);
  std::memcpy(t->c_cc, &p[image::kPtyCc], 32);
  const uint64_t v = p[image::kPtyWinsize];
  *w = {uint16_t(v), uint16_t(v >> 16), uint16_t(v >> 32), uint16_t(v >> 48)};
}

}  // namespace ckpt::tty
