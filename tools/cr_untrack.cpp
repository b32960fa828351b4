// cr_untrack --dir DIR [--json]: end the tracking a chain keeps in its
// running process and hand the process back clean.
#include <cstdio>

#include "common/cli.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "End the dirty-page tracking that the chain in DIR keeps in its running process\n"
      "(or job) and remove what it left there: the pagemap-scan tracker's userfaultfd,\n"
      "the kernel module's registration. The process is then as before its first\n"
      "checkpoint, and another tool (CRIU...) may take it over. The chain stays\n"
      "restorable; its next incremental finds the tracking gone and saves everything."};
  std::string dir;
  bool json = false;
  app.add_option("--dir", dir, "checkpoint directory of the process")->required();
  app.add_flag("--json", json, "print what was done as JSON on stdout");
  if (int rc = ckpt::cli::parse(app, argc, argv); rc >= 0) return rc;
  auto r = ckpt::untrack(dir);
  if (!r.ok()) return ckpt::cli::fail("cr_untrack", r.error());
  if (json)
    ckpt::cli::print_json(
        {{"tracker", r->tracker}, {"processes", r->processes}, {"released", r->released}});
  else
    std::printf("%s: tracking ended in %llu of %llu processes\n", r->tracker.c_str(),
                static_cast<unsigned long long>(r->released),
                static_cast<unsigned long long>(r->processes));
  return 0;
}
