"""What cr_plan (docs/policy.md) makes of the measured costs: the statistics file
it reads is exactly the --json lines the tools printed during the runs."""
import json
import os
import subprocess


def _cr_plan(tools, args):
    r = subprocess.run([tools.path("cr_plan")] + args, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=60)
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
    return r.stdout, None


def suggest(tools, stats_path, interval, mtbf):
    """cr_plan interval and incrementals on the measured statistics; each line of
    its text output, and the figures from its JSON (None where it refused)."""
    out = {"text": [], "incrementals": None, "interval_s": None, "errors": []}
    if not os.access(tools.path("cr_plan"), os.X_OK):
        out["errors"].append("no cr_plan in " + tools.bin)
        return out
    for sub, extra in (("interval", []), ("incrementals", ["--interval", str(interval)])):
        args = [sub, "--stats", stats_path, "--mtbf", str(mtbf)] + extra
        text, err = _cr_plan(tools, args)
        out["text"].append("$ cr_plan " + " ".join(a if a != stats_path else "stats.jsonl" for a in args))
        if err:
            out["text"].append(err)
            out["errors"].append(err)
            continue
        out["text"] += text.rstrip().splitlines()
        js, _ = _cr_plan(tools, args + ["--json"])
        j = json.loads(js) if js else {}
        out["json_" + sub] = j
        if sub == "interval":
            out["interval_s"] = j.get("exact", {}).get("period_s")
        else:
            out["incrementals"] = j.get("incrementals")
    return out
