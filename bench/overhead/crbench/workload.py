"""Running one workload process: its output, exit status, wall and CPU time."""
import os
import re
import signal
import subprocess
import threading
import time

from . import mpijob
from .errors import BenchError

_SECONDS = re.compile(r"\s+seconds\s+\S+")


class Spec:
    """What to run and how to tell it succeeded.

    success: a regex one output line must match (NPB: "Verification = SUCCESSFUL").
    compare: a regex selecting the lines an interrupted or checkpointed run must
    print exactly as the uninterrupted one (a "seconds N" field is ignored);
    empty: nothing compared beyond success.
    """

    def __init__(self, name, argv, success, compare, job=None, ready=None):
        self.name = name
        self.argv = argv
        self.success = re.compile(success)
        self.compare = re.compile(compare) if compare else None
        self.job = job  # an mpijob.Job: a process tree with its own TMPDIR and cwd
        # No checkpoint before a line matches this (an MPI job: its first
        # progress line, once MPI_Init is over).
        self.ready = re.compile(ready) if ready else None


def result_lines(spec, lines):
    """The lines to compare between runs, without timings."""
    if spec.compare is None:
        return []
    return [_SECONDS.sub("", l).rstrip() for l in lines if spec.compare.search(l)]


def check_output(spec, lines, status, what, reference=None):
    """Raises BenchError unless the run exited 0, printed the success line and,
    given a reference, the same result lines."""
    if status != 0:
        raise BenchError(f"{what}: exit status {status}, last line: {lines[-1] if lines else '(none)'}")
    if not any(spec.success.search(l) for l in lines):
        raise BenchError(f"{what}: no line matches the success pattern {spec.success.pattern!r}")
    got = result_lines(spec, lines)
    if reference is not None and got != reference:
        raise BenchError(f"{what}: result differs from the uninterrupted run: {got} != {reference}")
    return got


class Process:
    """A started workload: its lines are collected by a thread as they come."""

    def __init__(self, spec, log_path):
        self.spec = spec
        self.lines = []
        self.log = open(log_path, "w")
        self.t0 = time.monotonic()
        try:
            # close_fds (the default) matters: an inherited descriptor would
            # make the checkpoint of the job refuse it.
            job = spec.job
            self.popen = subprocess.Popen(spec.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, text=True, bufsize=1,
                                          env=job.env() if job else None,
                                          cwd=job.cwd if job else None)
        except OSError as e:
            raise BenchError(f"cannot start {spec.argv[0]}: {e.strerror}")
        self.pid = self.popen.pid
        self.status = None
        self.wall = None
        self.cpu = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.popen.stdout:
            self.lines.append(line.rstrip("\n"))
            self.log.write(line)
        self.log.flush()

    def is_ready(self):
        return self.spec.ready is None or any(self.spec.ready.search(l) for l in self.lines[-50:])

    def elapsed(self):
        return time.monotonic() - self.t0

    def poll(self):
        """True once the process has exited (and was reaped here)."""
        if self.status is not None:
            return True
        pid, st, ru = os.wait4(self.pid, os.WNOHANG)
        if pid == 0:
            return False
        self._reaped(st, ru)
        return True

    def wait(self, timeout):
        deadline = time.monotonic() + timeout
        while not self.poll():
            if time.monotonic() > deadline:
                self.kill()
                raise BenchError(f"{self.spec.name}: still running after {timeout:.0f} s (--timeout)")
            time.sleep(0.01)
        return self.status

    def kill(self):
        """SIGKILL, as a failing node would (to every process of a job); reaps it."""
        if self.status is None:
            if self.spec.job:
                pids = mpijob.tree_pids(self.pid)
                self.spec.job.record(pids)
                mpijob.kill_tree(pids)
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, st, ru = os.wait4(self.pid, 0)
            self._reaped(st, ru)
            if self.spec.job:
                self.spec.job.cleanup()

    def _reaped(self, st, ru):
        self.wall = self.elapsed()
        self.cpu = ru.ru_utime + ru.ru_stime
        self.status = os.waitstatus_to_exitcode(st)
        if self.status < 0:
            self.status = 128 - self.status
        self.popen.returncode = self.status  # reaped here, not by Popen
        self.reader.join(timeout=10)
        self.log.close()


def run_plain(spec, log_path, timeout, reference=None):
    """One uninterrupted run: (wall seconds, CPU seconds, result lines)."""
    p = Process(spec, log_path)
    p.wait(timeout)
    got = check_output(spec, p.lines, p.status, f"{spec.name} (uninterrupted)", reference)
    return p.wall, p.cpu, got
