"""An MPI workload as one job: Open MPI's mpirun and its ranks, checkpointed
by mpirun's PID with --tree (as tests/e2e/mpi.sh runs them; docs/mpi.md).

What a failure leaves and a restart must do without is made explicit here:
every process of the job is killed, the session directory (under the job's
own TMPDIR, on tmpfs) and the job's /dev/shm files are removed, and the
restart waits, outside its own timing, for the TIME-WAIT sockets that hold
the job's listening ports (docs/jobs.md) to go away."""
import os
import shutil
import signal
import tempfile
import time

from .errors import BenchError

WORKLOADS = ("cg_mpi", "stencil_mpi", "transpose_mpi")
_TIME_WAIT, _LISTEN = "06", "0A"


def launcher():
    path = shutil.which("mpirun.openmpi")
    if not path:
        raise BenchError("--mpi: no mpirun.openmpi (Debian's openmpi-bin)")
    return path


def argv(prog, np, mib, iters, min_ms=0):
    """The launch of tests/e2e/mpi.sh's ompi-vader mode. min_ms 0: the job
    computes flat out (a benchmark); above, each iteration lasts at least that
    long (a test that needs the job to outlast slow checkpoints)."""
    return [launcher(), "--allow-run-as-root", "--oversubscribe", "-np", str(np),
            "--mca", "pml", "ob1", "--mca", "btl", "vader,self",
            "--mca", "btl_vader_single_copy_mechanism", "none",
            "--mca", "oob_tcp_if_include", "lo", prog, str(mib), str(iters), str(min_ms)]


class Job:
    """The job's private TMPDIR (Open MPI's session directory goes there) and
    working directory; what a killed job leaves is removed by cleanup()."""

    def __init__(self, name):
        base = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self.tmp = tempfile.mkdtemp(prefix=f"cr_bench-{name}.", dir=base)
        self.cwd = tempfile.mkdtemp(prefix=f"cr_bench-{name}.cwd.")
        self.shm_files = set()
        self.ports = set()  # the job's listening TCP ports

    def env(self):
        e = dict(os.environ)
        e["TMPDIR"] = self.tmp
        return e

    def record(self, pids):
        """Before the kill: the job's /dev/shm files and listening ports."""
        inodes = set()
        for p in pids:
            try:
                with open(f"/proc/{p}/maps") as f:
                    for line in f:
                        parts = line.split(maxsplit=5)
                        if len(parts) == 6 and parts[5].startswith("/dev/shm/"):
                            self.shm_files.add(parts[5].rstrip("\n"))
                for fd in os.listdir(f"/proc/{p}/fd"):
                    try:
                        link = os.readlink(f"/proc/{p}/fd/{fd}")
                    except OSError:
                        continue
                    if link.startswith("socket:["):
                        inodes.add(link[8:-1])
                    elif link.startswith("/dev/shm/") and not link.endswith(" (deleted)"):
                        self.shm_files.add(link)
            except OSError:
                continue
        for local, _, state, inode in _tcp_rows():
            if state == _LISTEN and inode in inodes:
                self.ports.add(local)

    def cleanup(self):
        """What a failed node leaves of the job: nothing on tmpfs."""
        for f in self.shm_files:
            if not f.startswith(self.tmp):
                try:
                    os.unlink(f)
                except OSError:
                    pass
        for entry in os.listdir(self.tmp):
            p = os.path.join(self.tmp, entry)
            shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else os.unlink(p)

    def wait_time_wait(self, limit=70):
        """Waits until no TIME-WAIT socket holds a listening port of the job;
        returns the seconds waited."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit:
            if not any(st == _TIME_WAIT and local in self.ports for local, _, st, _ in _tcp_rows()):
                break
            time.sleep(0.2)
        return time.monotonic() - t0

    def remove(self):
        shutil.rmtree(self.tmp, ignore_errors=True)
        shutil.rmtree(self.cwd, ignore_errors=True)


def _tcp_rows():
    """(local port, remote port, state, inode) of every TCP socket here."""
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    x = line.split()
                    yield int(x[1].rsplit(":", 1)[1], 16), int(x[2].rsplit(":", 1)[1], 16), x[3], x[9]
        except OSError:
            continue


def tree_pids(root):
    """root and its descendants, root first."""
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def kill_tree(pids, timeout=20):
    """SIGKILL to every process, as a failing node would; waits until they are gone."""
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in pids[1:]):
        if time.monotonic() > deadline:
            raise BenchError(f"processes of the job did not go away: {pids}")
        time.sleep(0.05)
