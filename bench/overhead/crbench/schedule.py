"""A workload under a checkpoint schedule, and killed and restarted from its chain."""
import os
import shutil
import time

from . import progress
from .errors import BenchError
from .tools import dir_bytes, generation_dir
from .workload import Process, check_output


def _record(index, kind, chain, t, st, wall, gen_bytes, full_pages):
    pages = st["pages_written"] + st["pages_zero"]
    return {
        "index": index, "kind": kind, "chain": chain, "t": round(t, 4),
        "generation": st["generation"], "tracker": st["tracker"],
        "frozen_s": st["frozen_seconds"], "memory_s": st["memory_seconds"],
        "total_s": st["total_seconds"], "tool_wall_s": round(wall, 4),
        "pages_scanned": st["pages_scanned"], "pages_written": st["pages_written"],
        "pages_zero": st["pages_zero"], "bytes_written": st["bytes_written"],
        "disk_bytes": gen_bytes,
        # Pages this checkpoint saved over the pages its chain's full saved.
        "dirty_fraction": (pages / full_pages) if kind == "incr" and full_pages else None,
        "tracker_reset": st.get("tracker_reset", ""),
        "processes": st.get("processes", 1),
    }


def _sleep_until(p, t, timeout, what):
    """Waits until the workload has run t seconds and is ready (Spec.ready);
    False if it ended first."""
    while p.elapsed() < t or not p.is_ready():
        if p.poll():
            return False
        if p.elapsed() > timeout:
            p.kill()
            raise BenchError(f"{what}: still running after {timeout:.0f} s (--timeout)")
        time.sleep(min(0.01, max(0.001, t - p.elapsed())))
    return not p.poll()


def _ending(p, grace=10):
    """After a failed checkpoint: whether the workload was ending. A job's
    launcher outlives its ranks by a moment (MPI_Finalize), during which a
    checkpoint can fail (a rank's shared segments going away): it counts as
    ended if it exits within `grace` seconds."""
    deadline = time.monotonic() + (grace if p.spec.job else 0)
    while not p.poll():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def checkpointed_run(spec, tools, interval, incrementals, tracker, ckpt_base, log_path,
                     timeout, reference, label, keep=False):
    """Runs the workload to its end with a full, then `incrementals` incrementals,
    then a new full (a new chain directory), ... every `interval` seconds.
    Returns (wall, cpu, checkpoint records); none if the workload ended before
    the first checkpoint was due."""
    os.makedirs(ckpt_base, exist_ok=True)  # cr_full makes the chain directory, not its parents
    p = Process(spec, log_path)
    records, chain, in_chain, full_pages = [], 0, 0, None
    next_t = interval
    while _sleep_until(p, next_t, timeout, label):
        kind = "full" if in_chain in (0, incrementals + 1) else "incr"
        if kind == "full":
            if chain and not keep:  # measured already: a long run must not fill the disk
                shutil.rmtree(os.path.join(ckpt_base, "chain-%03d" % chain), ignore_errors=True)
            chain += 1
            in_chain = 0
        d = os.path.join(ckpt_base, "chain-%03d" % chain)
        t = p.elapsed()
        try:
            st, wall = tools.checkpoint(kind, d, p.pid, tracker)
        except BenchError as e:
            if _ending(p):  # it finished while being checkpointed: the schedule ends
                progress.show(f"{label}: the {kind} checkpoint at {t:.1f} s failed as the "
                              f"workload ended (not counted): {e}", True)
                break
            p.kill()
            raise BenchError(f"{label}: {kind} checkpoint at {t:.1f} s failed: {e}")
        if records and st.get("processes", 1) < records[0]["processes"]:
            # A job whose members are exiting (MPI_Finalize done, mpirun
            # left): not a checkpoint of the job that ran; the schedule ends.
            progress.show(f"{label}: the checkpoint at {t:.1f} s held {st.get('processes')} of "
                          f"{records[0]['processes']} processes: the job was ending (not counted)",
                          True)
            tools.forget_last()
            break
        gen_bytes = dir_bytes(generation_dir(d, st["generation"]))
        if kind == "full":
            full_pages = st["pages_written"] + st["pages_zero"]
        records.append(_record(len(records) + 1, kind, chain, t, st, wall, gen_bytes, full_pages))
        in_chain += 1
        next_t = max(next_t + interval, p.elapsed())
        progress.show(f"{label}: {p.elapsed():.1f} s, {len(records)} checkpoints")
    p.wait(timeout)
    check_output(spec, p.lines, p.status, label, reference)
    return p.wall, p.cpu, records


class _EndedEarly(BenchError):
    pass


def restart_study(spec, tools, interval, n, tracker, ckpt_dir, log_dir, timeout, reference, label):
    """Full + n incrementals every `interval` s, then SIGKILL (the failure), then a
    real restart from the full plus k incrementals for k = 0..n, each run to its
    end and its result checked. Returns one record per k.

    A run that ends before its chain is complete (the machine was faster than
    the uninterrupted run said) is tried again with half the interval, twice
    at most; the records say which interval was used."""
    for attempt in range(3):
        try:
            return _restart_study(spec, tools, interval / 2 ** attempt, n, tracker, ckpt_dir,
                                  log_dir, timeout, reference, label)
        except _EndedEarly as e:
            if attempt == 2:
                raise BenchError(str(e))
            progress.show(f"{label}: {e}; again with half the interval", True)


def _restart_study(spec, tools, interval, n, tracker, ckpt_dir, log_dir, timeout, reference, label):
    shutil.rmtree(ckpt_dir, ignore_errors=True)
    os.makedirs(os.path.dirname(ckpt_dir), exist_ok=True)
    p = Process(spec, os.path.join(log_dir, "restart-source.log"))
    chain = []
    for k in range(n + 1):
        if not _sleep_until(p, interval * (k + 1), timeout, label):
            raise _EndedEarly(f"{label}: the workload ended after {p.elapsed():.1f} s, before a "
                              f"full and {n} incrementals every {interval:g} s: use a larger class "
                              f"or a shorter interval")
        kind = "full" if k == 0 else "incr"
        try:
            st, _ = tools.checkpoint(kind, ckpt_dir, p.pid, tracker)
        except BenchError as e:
            if _ending(p):
                raise _EndedEarly(f"{label}: the workload ended during the {kind} checkpoint at "
                                  f"{p.elapsed():.1f} s")
            p.kill()
            raise BenchError(f"{label}: {kind} checkpoint failed: {e}")
        if chain and st.get("processes", 1) < chain[0].get("processes", 1):
            tools.forget_last()
            p.kill()
            raise _EndedEarly(f"{label}: the job was ending at the {kind} checkpoint at "
                              f"{p.elapsed():.1f} s ({st.get('processes')} processes left)")
        chain.append(st)
        progress.show(f"{label}: {len(chain)} of {n + 1} checkpoints")
    t_kill = p.elapsed()
    p.kill()
    out = []
    for k, st in enumerate(chain):
        g = st["generation"]
        progress.show(f"{label}: restart from full + {k} incrementals (generation {g})", True)
        if spec.job:  # what a killed job leaves; its TIME-WAIT sockets the restore ends itself
            spec.job.cleanup()
        rs, wall, rc, lines = tools.restart(ckpt_dir, g, os.path.join(log_dir, f"restart-{k}.log"),
                                            timeout)
        check_output(spec, lines, rc, f"{label}: restart from full + {k} incrementals", reference)
        out.append({
            "chain_length": k, "generation": g, "interval_s": interval,
            "killed_at_s": round(t_kill, 3),
            "restore_s": rs["restore_seconds"], "generations_read": rs["generations_read"],
            "pages_read": rs["pages_read"], "pages_written": rs["pages_written"],
            "pages_skipped": rs["pages_skipped"], "bytes_read": rs["bytes_read"],
            "run_to_end_s": round(wall, 3), "verified": True,
        })
    return out
