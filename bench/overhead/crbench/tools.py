"""The project's command-line tools, run as a user would, with --json."""
import json
import os
import subprocess
import time

from .errors import BenchError


class Tools:
    def __init__(self, bin_dir):
        self.bin = bin_dir
        self.collect = None  # a list: every --json line of a checkpoint or restart goes there
        self.tree = False  # checkpoint the workload and its descendants as one job
        for t in ("cr_full", "cr_incr", "cr_restart", "cr_info"):
            if not os.access(self.path(t), os.X_OK):
                raise BenchError(f"no {t} in {bin_dir} (build the project, or give --bin)")

    def path(self, tool):
        return os.path.join(self.bin, tool)

    def run_json(self, argv, timeout=600):
        """Runs a tool that prints one JSON line; returns (json, wall seconds) or
        raises with the tool's own one-line cause."""
        t0 = time.monotonic()
        r = subprocess.run([self.path(argv[0])] + argv[1:], capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        wall = time.monotonic() - t0
        if r.returncode != 0:
            cause = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
            raise BenchError(cause)
        line = r.stdout.strip().splitlines()[0]
        if self.collect is not None and argv[0] in ("cr_full", "cr_incr"):
            self.collect.append(line)
        return json.loads(line), wall

    def forget_last(self):
        """Drops the newest collected line (a checkpoint not counted)."""
        if self.collect:
            self.collect.pop()

    def checkpoint(self, kind, ckpt_dir, pid, tracker):
        """cr_full or cr_incr (with --tree when self.tree): (stats json, wall seconds)."""
        argv = ["cr_full" if kind == "full" else "cr_incr", "--dir", ckpt_dir, "--json", str(pid)]
        if self.tree:
            argv.insert(1, "--tree")
        if kind == "full" and tracker:
            argv[1:1] = ["--tracker", tracker]
        return self.run_json(argv)

    def info(self, ckpt_dir):
        return self.run_json(["cr_info", "--dir", ckpt_dir, "--json"])[0]

    def restart(self, ckpt_dir, generation, log_path, timeout):
        """cr_restart --generation G --json, waited for: (restore stats, wall seconds to
        the restored program's end, its exit status, its output lines)."""
        t0 = time.monotonic()
        with open(log_path, "w") as log:
            r = subprocess.run([self.path("cr_restart"), "--dir", ckpt_dir, "--generation",
                                str(generation), "--json"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=timeout,
                               stdin=subprocess.DEVNULL)
            log.write(r.stdout)
            log.write(r.stderr)
        wall = time.monotonic() - t0
        # The restored program shares cr_restart's stdout and runs before
        # cr_restart prints its statistics: the JSON line can come anywhere.
        out = r.stdout.splitlines()
        stats = next((i for i, l in enumerate(out) if l.startswith('{"')), None)
        if stats is None:
            cause = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
            raise BenchError(f"cr_restart generation {generation}: {cause}")
        if self.collect is not None:
            self.collect.append(out[stats])
        return json.loads(out[stats]), wall, r.returncode, out[:stats] + out[stats + 1:]


def dir_bytes(path):
    """Bytes of the files under path (what the generation costs on disk)."""
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except FileNotFoundError:
                pass
    return total


def generation_dir(ckpt_dir, generation):
    return os.path.join(ckpt_dir, "gen-%06d" % generation)
