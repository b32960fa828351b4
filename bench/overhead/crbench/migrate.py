"""One live migration of a workload over loopback (cr_recv on 127.0.0.1 with
--new-pid, cr_migrate --live): the pre-copy rounds and the downtime, and the
migrated run's result, checked."""
import csv
import os
import socket
import subprocess
import time

from .errors import BenchError
from .workload import Process, check_output

ROUND_FIELDS = ["round", "generation", "dirty_bytes", "bytes", "seconds", "send_seconds",
                "frozen_seconds"]


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _listening(port):
    """True once a socket listens on 127.0.0.1:port (read from /proc, so the
    one connection cr_recv --once serves is not spent on a probe)."""
    want = "0100007F:%04X" % port
    with open("/proc/net/tcp") as f:
        return any(l.split()[1] == want and l.split()[3] == "0A" for l in list(f)[1:])


def live(spec, tools, after, out_dir, reference, timeout):
    for t in ("cr_migrate", "cr_recv"):
        if not os.access(tools.path(t), os.X_OK):
            raise BenchError(f"--migrate: no {t} in {tools.bin}")
    token = os.path.join(out_dir, "token")
    fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, os.urandom(32))
    os.close(fd)
    port = _free_port()
    recv_log = open(os.path.join(out_dir, "logs", "migrate-recv.log"), "w")
    recv = subprocess.Popen([tools.path("cr_recv"), "--listen", f"127.0.0.1:{port}", "--token", token,
                             "--once", "--new-pid", "--json"], stdout=subprocess.PIPE,
                            stderr=recv_log, text=True, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not _listening(port):
            if recv.poll() is not None or time.monotonic() > deadline:
                raise BenchError("--migrate: cr_recv is not listening (see logs/migrate-recv.log)")
            time.sleep(0.05)
        p = Process(spec, os.path.join(out_dir, "logs", "migrate-source.log"))
        while p.elapsed() < after:
            if p.poll():
                raise BenchError(f"--migrate: {spec.name} ended before {after} s")
            time.sleep(0.01)
        try:
            st, _ = tools.run_json(["cr_migrate", "--to", f"127.0.0.1:{port}", "--token", token,
                                    "--live", "--json", str(p.pid)])
        except BenchError as e:
            p.kill()
            raise BenchError(f"--migrate: {e}")
        p.wait(timeout)  # the source ends once the destination runs
        out, _ = recv.communicate(timeout=timeout)
    finally:
        if recv.poll() is None:
            recv.kill()
            recv.wait()
        recv_log.close()
        os.unlink(token)
    # cr_recv's JSON line and the migrated program's output share its stdout.
    lines = [l for l in out.splitlines() if not l.startswith('{"')]
    check_output(spec, lines, recv.returncode, f"{spec.name}: migrated run", reference)
    with open(os.path.join(out_dir, "migration.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=ROUND_FIELDS, extrasaction="ignore")
        w.writeheader()
        for i, r in enumerate(st["round_details"]):
            w.writerow(dict(r, round=i + 1))
    return {k: st[k] for k in ("mode", "tracker", "rounds", "bytes_total", "migration_seconds",
                               "downtime_seconds", "stop_reason")} | {"verified": True,
                                                                       "round_details": st["round_details"]}
