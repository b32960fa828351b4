// Reading a socket's receive queue without consuming it, message by
// message: SO_PEEK_OFF set to 0 makes every MSG_PEEK read the next message
// (UNIX and UDP dumps), and is put back as the program had it.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

#include <ckpt/result.hpp>

namespace ckpt::sockets {

// An int socket option, or 0 where it cannot be read (also the TCP dump's).
int sockopt_int(int sock, int level, int opt);

// Peeks from the start of the queue on: returns the program's SO_PEEK_OFF
// (for end_peek).
Result<int> begin_peek(int sock, const std::string& what);
// Puts the program's SO_PEEK_OFF back; `s` (the walk's outcome) wins over
// an error here.
Status end_peek(int sock, int saved_off, const std::string& what, Status s);

// One recvmsg(MSG_PEEK | MSG_DONTWAIT | flags) into `buf`, with room for the
// sender's address in `from` and for control messages in `ctl`; retried on
// EINTR. Returns the length, or -1 with errno (EAGAIN: the queue is done).
ssize_t peek_message(int sock, std::vector<uint8_t>* buf, sockaddr* from, socklen_t from_len,
                     void* ctl, size_t ctl_len, int flags, msghdr* mh);

}  // namespace ckpt::sockets
