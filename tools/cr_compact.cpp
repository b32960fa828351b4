// cr_compact --dir DIR [--chain N] [--json]: fold the chain into one full checkpoint, offline.
#include "common/cli.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "Fold the newest chain in DIR (a full checkpoint and its incrementals) into one\n"
      "new full checkpoint, then delete the chain it replaces. No process is touched;\n"
      "until the new checkpoint is committed the old chain stays restorable."};
  std::string dir;
  uint64_t chain = 0;
  bool json = false;
  app.add_option("--dir", dir, "checkpoint directory (a chain, or cr_run's directory of chains)")
      ->required();
  app.add_option("--chain", chain, "a directory of chains: fold this chain (default: the newest)");
  app.add_flag("--json", json, "print statistics as JSON on stdout");
  if (int rc = ckpt::cli::parse(app, argc, argv); rc >= 0) return rc;
  if (auto d = ckpt::resolve_checkpoint_dir(dir, chain); d.ok())
    dir = *d;
  else
    return ckpt::cli::fail("cr_compact", d.error());
  auto r = ckpt::compact_chain(dir);
  if (!r.ok()) return ckpt::cli::fail("cr_compact", r.error());
  if (json)
    ckpt::cli::print_json({{"generation", r->generation},
                           {"generations_folded", r->generations_folded},
                           {"pages_written", r->pages_written},
                           {"pages_skipped", r->pages_skipped},
                           {"bytes_written", r->bytes_written},
                           {"seconds", r->seconds}});
  return 0;
}
