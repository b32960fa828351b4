// cr_job checkpoint|restart|migrate --nodes FILE --token FILE: a coordinated
// checkpoint or restart of a job across nodes through their cr_noded agents,
// or one node's part moved to another agent (docs/nodes.md).
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
  auto* mg = app.add_subcommand(
      "migrate", "move one node's part to another agent while the other parts run on");
  common(mg);
  std::string from, to, takeover;
  bool live = false;
  mg->add_option("--node", from, "the agent (HOST:PORT, as in the node file) whose part moves")
      ->required();
  mg->add_option("--to", to, "the destination agent, HOST:PORT")->required();
  mg->add_option("--takeover", takeover,
                 "shell command that moves the part's address from $CKPT_FROM to $CKPT_TO "
                 "(run once the part is frozen with its state there; run with the two swapped "
                 "if the destination fails afterwards)")
      ->required();
  mg->add_flag("--live", live, "pre-copy rounds while the part runs (default: frozen)");
  if (int rc = ckpt::cli::parse(app, argc, argv); rc >= 0) return rc;

  auto list = ckpt::nodes::read_nodes(nodes);
  if (!list.ok()) return ckpt::cli::fail("cr_job", list.error());
  c.nodes = *list;
  if (mg->parsed()) {
    auto m = ckpt::nodes::migrate_node(c, from, to, live, takeover);
    if (!m.ok()) return ckpt::cli::fail("cr_job", m.error());
    if (!m->note.empty()) std::fprintf(stderr, "cr_job: %s\n", m->note.c_str());
    // The node file follows the part, for the next checkpoint or migration.
    if (auto s = ckpt::nodes::rewrite_nodes(nodes, c.nodes, *m); !s.ok())
      return ckpt::cli::fail("cr_job", s.error());
    if (json) {
      nlohmann::json j{{"action", live ? "migrate-live" : "migrate-frozen"},
                       {"from", m->from},
                       {"to", m->to},
                       {"pid", m->pid},
                       {"processes", m->processes},
                       {"rounds", m->rounds},
                       {"bytes", m->bytes},
                       {"downtime_seconds", m->downtime_seconds},
                       {"takeover_seconds", m->takeover_seconds},
                       {"migration_seconds", m->migration_seconds},
                       {"total_seconds", m->total_seconds}};
      ckpt::cli::print_json(j);
    }
    return 0;
  }
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
