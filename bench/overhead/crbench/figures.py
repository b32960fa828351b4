"""Figures derived from the measurements: means, slowdowns, O_f/O_i, S_n."""
import statistics


def mean(xs):
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def pct(a, b):
    """How much longer a is than b, in percent (None if either is missing)."""
    return None if a is None or not b else 100.0 * (a - b) / b


def costs(records):
    """Per kind: count and means of frozen/total time, bytes, pages, disk, dirty fraction."""
    out = {}
    for kind in ("full", "incr"):
        rs = [r for r in records if r["kind"] == kind]
        out[kind] = {
            "count": len(rs),
            "frozen_s": mean(r["frozen_s"] for r in rs),
            "total_s": mean(r["total_s"] for r in rs),
            "tool_wall_s": mean(r["tool_wall_s"] for r in rs),
            "bytes_written": mean(r["bytes_written"] for r in rs),
            "pages_written": mean(r["pages_written"] for r in rs),
            "disk_bytes": mean(r["disk_bytes"] for r in rs),
            "dirty_fraction": mean(r["dirty_fraction"] for r in rs),
        }
    return out


def savings(o_f, o_i, restarts):
    """S_n = n*(O_f - O_i) - (R_(f+n*i) - R_f) for every measured n >= 1
    (shared/policy.md); O_f and O_i are total checkpoint times."""
    if o_f is None or o_i is None or not restarts:
        return {}
    r_f = restarts[0]["restore_s"]
    return {r["chain_length"]: r["chain_length"] * (o_f - o_i) - (r["restore_s"] - r_f)
            for r in restarts[1:]}
