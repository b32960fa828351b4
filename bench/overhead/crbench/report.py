"""Writing one workload's results (CSV, JSON, Markdown) and the summary."""
import csv
import json
import os

RUN_FIELDS = ["workload", "mode", "interval_s", "repeat", "wall_s", "cpu_s"]
CKPT_FIELDS = ["workload", "interval_s", "repeat", "index", "kind", "chain", "t", "generation",
               "tracker", "frozen_s", "memory_s", "total_s", "tool_wall_s", "pages_scanned",
               "pages_written", "pages_zero", "bytes_written", "disk_bytes", "dirty_fraction",
               "tracker_reset"]
OVERHEAD_FIELDS = ["workload", "interval_s", "runs", "baseline_s", "wall_s", "slowdown_pct",
                   "cpu_baseline_s", "cpu_s", "cpu_slowdown_pct", "checkpoints_per_run"]
RESTART_FIELDS = ["workload", "chain_length", "generation", "interval_s", "killed_at_s", "restore_s",
                  "generations_read", "pages_read", "pages_written", "pages_skipped", "bytes_read",
                  "run_to_end_s", "verified"]
SUMMARY_FIELDS = ["workload", "baseline_s", "interval_s", "slowdown_pct", "cpu_slowdown_pct",
                  "O_f", "O_i", "frozen_f", "frozen_i", "R_f", "R_f1i", "R_f3i", "S_1", "S_3",
                  "full_MiB", "incr_MiB", "full_disk_MiB", "incr_disk_MiB", "dirty_pct",
                  "plan_incrementals", "plan_interval_s"]


def write_csv(path, fields, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in fields})


def fmt(x, digits=3, scale=1.0):
    """A measured figure, or a dash for one that was not measured."""
    if x is None:
        return "—"
    if isinstance(x, float) or scale != 1.0:
        return f"{x * scale:.{digits}g}" if abs(x * scale) >= 1000 else f"{x * scale:.{digits}f}"
    return str(x)


MIB = 1.0 / 1048576


def pages(x):
    return "—" if x is None else f"{x:.0f}"


def markdown(res):
    name = res["workload"]
    lines = [f"### {name}", "", f"`{' '.join(res['argv'])}`: uninterrupted "
             f"{fmt(res['baseline']['wall_s'], 2)} s wall, {fmt(res['baseline']['cpu_s'], 2)} s CPU "
             f"(mean of {len(res['baseline']['runs'])}); tracker {res['tracker'] or 'auto'}, "
             f"a full then {res['incrementals']} incrementals per chain.", "",
             "| interval (s) | runs | with checkpoints (s) | slowdown % | CPU slowdown % | checkpoints per run |",
             "|---:|---:|---:|---:|---:|---:|"]
    for o in res["overhead"]:
        lines.append(f"| {o['interval_s']:g} | {o['runs']} | {fmt(o['wall_s'], 2)} | "
                     f"{fmt(o['slowdown_pct'], 1)} | {fmt(o['cpu_slowdown_pct'], 1)} | "
                     f"{fmt(o['checkpoints_per_run'], 1)} |")
    c = res["costs"]
    lines += ["", f"Checkpoints at interval {res['primary_interval_s']:g} s:", "",
              "| kind | count | frozen (s) | total (s) | written (MiB) | pages | on disk (MiB) | dirty % |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for kind in ("full", "incr"):
        k = c[kind]
        lines.append(f"| {kind} | {k['count']} | {fmt(k['frozen_s'], 3)} | {fmt(k['total_s'], 3)} | "
                     f"{fmt(k['bytes_written'], 1, MIB)} | {pages(k['pages_written'])} | "
                     f"{fmt(k['disk_bytes'], 1, MIB)} | {fmt(k['dirty_fraction'], 1, 100.0)} |")
    if res["restarts"]:
        lines += ["", f"Checkpointed every {res['restarts'][0].get('interval_s', res['primary_interval_s']):g} s, killed (SIGKILL) at "
                  f"{res['restarts'][0]['killed_at_s']:.1f} s, then restarted "
                  "from each generation of its chain; every restarted run finished and printed the "
                  "uninterrupted run's result:", "",
                  "| restart from | restore (s) | generations read | read (MiB) | to the end (s) | result |",
                  "|---|---:|---:|---:|---:|---|"]
        for r in res["restarts"]:
            what = "full" if r["chain_length"] == 0 else f"full + {r['chain_length']} incr"
            lines.append(f"| {what} | {fmt(r['restore_s'], 3)} | {r['generations_read']} | "
                         f"{fmt(r['bytes_read'], 1, MIB)} | {fmt(r['run_to_end_s'], 2)} | "
                         f"{'same' if r['verified'] else 'DIFFERENT'} |")
    if res["savings"]:
        lines += ["", "Savings of n incrementals over n fulls, S_n = n(O_f - O_i) - (R_(f+n·i) - R_f): " +
                  ", ".join(f"S_{n} = {fmt(s, 3)} s" for n, s in sorted(res["savings"].items())) + "."]
    plan = res.get("plan") or {}
    if plan.get("text"):
        lines += ["", f"cr_plan with these costs and an MTBF of {res['mtbf']}:", "", "```"]
        lines += plan["text"]
        lines += ["```"]
    return "\n".join(lines) + "\n"


def summary_row(res):
    c, r = res["costs"], {x["chain_length"]: x["restore_s"] for x in res["restarts"]}
    o = res["overhead"][0] if res["overhead"] else {}
    plan = res.get("plan") or {}
    return {
        "workload": res["workload"], "baseline_s": res["baseline"]["wall_s"],
        "interval_s": res["primary_interval_s"], "slowdown_pct": o.get("slowdown_pct"),
        "cpu_slowdown_pct": o.get("cpu_slowdown_pct"),
        "O_f": c["full"]["total_s"], "O_i": c["incr"]["total_s"],
        "frozen_f": c["full"]["frozen_s"], "frozen_i": c["incr"]["frozen_s"],
        "R_f": r.get(0), "R_f1i": r.get(1), "R_f3i": r.get(3),
        "S_1": res["savings"].get(1), "S_3": res["savings"].get(3),
        "full_MiB": None if c["full"]["bytes_written"] is None else c["full"]["bytes_written"] * MIB,
        "incr_MiB": None if c["incr"]["bytes_written"] is None else c["incr"]["bytes_written"] * MIB,
        "full_disk_MiB": None if c["full"]["disk_bytes"] is None else c["full"]["disk_bytes"] * MIB,
        "incr_disk_MiB": None if c["incr"]["disk_bytes"] is None else c["incr"]["disk_bytes"] * MIB,
        "dirty_pct": None if c["incr"]["dirty_fraction"] is None else c["incr"]["dirty_fraction"] * 100,
        "plan_incrementals": plan.get("incrementals"), "plan_interval_s": plan.get("interval_s"),
    }


def summary_markdown(rows):
    head = ("| workload | runtime (s) | interval (s) | slowdown % | O_f (s) | O_i (s) | R_f (s) | "
            "R_(f+1i) (s) | R_(f+3i) (s) | S_1 (s) | S_3 (s) | full (MiB) | incr (MiB) | dirty % | "
            "cr_plan m |")
    out = [head, "|---|" + "---:|" * (head.count("|") - 2)]
    for s in rows:
        out.append("| " + " | ".join([
            s["workload"], fmt(s["baseline_s"], 2), fmt(s["interval_s"], 2), fmt(s["slowdown_pct"], 1),
            fmt(s["O_f"], 3), fmt(s["O_i"], 3), fmt(s["R_f"], 3), fmt(s["R_f1i"], 3),
            fmt(s["R_f3i"], 3), fmt(s["S_1"], 3), fmt(s["S_3"], 3), fmt(s["full_MiB"], 1),
            fmt(s["incr_MiB"], 1), fmt(s["dirty_pct"], 1),
            "—" if s["plan_incrementals"] is None
            else "no limit" if s["plan_incrementals"] == -1 else str(s["plan_incrementals"])]) + " |")
    return "\n".join(out) + "\n"


def write_workload(out_dir, res):
    d = os.path.join(out_dir, res["workload"])
    os.makedirs(d, exist_ok=True)
    write_csv(os.path.join(d, "runs.csv"), RUN_FIELDS, res["runs"])
    write_csv(os.path.join(d, "checkpoints.csv"), CKPT_FIELDS, res["checkpoints"])
    write_csv(os.path.join(d, "overhead.csv"), OVERHEAD_FIELDS, res["overhead"])
    write_csv(os.path.join(d, "restarts.csv"), RESTART_FIELDS, res["restarts"])
    with open(os.path.join(d, "result.json"), "w") as f:
        json.dump(res, f, indent=1)
    with open(os.path.join(d, "table.md"), "w") as f:
        f.write(markdown(res))


def write_summary(out_dir, results):
    rows = [summary_row(r) for r in results]
    write_csv(os.path.join(out_dir, "summary.csv"), SUMMARY_FIELDS, rows)
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(rows, f, indent=1)
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(summary_markdown(rows))
        for r in results:
            f.write("\n" + markdown(r))
