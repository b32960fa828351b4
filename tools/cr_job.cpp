// cr_job checkpoint|restart --nodes FILE --token FILE: a coordinated
// checkpoint or restart of a job across nodes through their cr_noded agents
// (docs/nodes.md).
#include "common/cli.hpp"
#include "nodes/coordinator.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "Coordinated checkpoint and restart of a job across nodes, driving the cr_noded agent of\n"
      "every node: all frozen before any is read, released together; a node that fails\n"
      "aborts the round everywhere."};
  app.require_subcommand(1);
  ckpt::nodes::Coordination c;
  std::string nodes;
  bool json = false, incremental = false;
  uint64_t generation = 0;
  auto common = [&](CLI::App* s) {
    s->add_option("--nodes", nodes, "node file: one 'HOST:PORT [PID]' a line")->required();
    s->add_option("--token", c.token_file, "shared token file (owner-only)")->required();
    s->add_option("--timeout", c.timeout, "seconds to wait for an agent at each step (default 60)");
    s->add_flag("--json", json, "print the outcome as JSON on stdout");
  };
  auto* ck = app.add_subcommand("checkpoint", "a full (or --incremental) coordinated checkpoint");
  common(ck);
  ck->add_flag("--incremental", incremental, "on top of the newest generation of every node");
  auto* rs = app.add_subcommand("restart", "restore every node's part, then release them together");
  common(rs);
  rs->add_option("--generation", generation, "the generation to restore (default: the newest)");
  if (int rc = ckpt::cli::parse(app, argc, argv); rc >= 0) return rc;

  auto list = ckpt::nodes::read_nodes(nodes);
  if (!list.ok()) return ckpt::cli::fail("cr_job", list.error());
  c.nodes = *list;
  const bool checkpoint = ck->parsed();
  auto r = checkpoint ? ckpt::nodes::coordinated_checkpoint(c, !incremental)
                      : ckpt::nodes::coordinated_restart(c, generation);
  if (!r.ok()) return ckpt::cli::fail("cr_job", r.error());
  if (json) {
    nlohmann::json j;
    j["action"] = checkpoint ? (incremental ? "incremental" : "full") : "restart";
    j["generation"] = r->generation;
    if (checkpoint) j["frozen_seconds"] = r->frozen_seconds;
    j["total_seconds"] = r->total_seconds;
    for (const auto& n : r->nodes) {
      nlohmann::json o{{"node", n.addr}, {"generation", n.generation}};
      if (checkpoint) {
        o["frozen_seconds"] = n.frozen_seconds;
        o["processes"] = n.processes;
      } else {
        o["pid"] = n.pid;
      }
      j["nodes"].push_back(o);
    }
    ckpt::cli::print_json(j);
  }
  return 0;
}
