"""An MPI workload as one job: Open MPI's mpirun and its ranks, checkpointed
by mpirun's PID with --tree (as tests/e2e/mpi.sh runs them; docs/mpi.md).

What a failure leaves and a restart must do without is made explicit here:
every process of the job is killed, the session directory (under the job's
own TMPDIR, on tmpfs) and the job's /dev/shm files are removed. The
TIME-WAIT sockets the kill leaves on the job's listening ports are ended by
the restore itself (docs/jobs.md), inside its measured time."""
import os
import shutil
import signal
import tempfile
import time

from .errors import BenchError

WORKLOADS = ("cg_mpi", "stencil_mpi", "transpose_mpi")


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

    def env(self):
        e = dict(os.environ)
        e["TMPDIR"] = self.tmp
        return e

    def record(self, pids):
        """Before the kill: the job's /dev/shm files."""
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
                    if link.startswith("/dev/shm/") and not link.endswith(" (deleted)"):
                        self.shm_files.add(link)
            except OSError:
                continue

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

    def remove(self):
        shutil.rmtree(self.tmp, ignore_errors=True)
        shutil.rmtree(self.cwd, ignore_errors=True)


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
