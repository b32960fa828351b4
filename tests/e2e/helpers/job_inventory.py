#!/usr/bin/env python3
"""job_inventory.py ROOT_PID: what every process of a running job holds.

A diagnostic for docs/mpi.md ("What an MPI job holds"): for ROOT_PID and all
its descendants, the process tree (pid, ppid, pgid, sid, tty, threads), every
file descriptor classified (file, pipe, socket, anon inode, tty), each socket
resolved to its kind, state, addresses and queues with its peer inside or
outside the job, each pipe/socket with the processes outside the job that also
hold it, the fdinfo of anon inodes, the MAP_SHARED mappings, and the SysV
shared memory segments attached by the job. Prints Markdown on stdout.
Read-only: it only reads /proc and runs `ss` and `ipcs`.
"""
import collections
import ipaddress
import os
import re
import subprocess
import sys


def read(path, default=""):
    try:
        with open(path, "r", errors="replace") as f:
            return f.read()
    except OSError:
        return default


def children(pid):
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        out += [int(c) for c in read(f"/proc/{pid}/task/{tid}/children").split()]
    return out


def tree(root):
    order, todo = [], [root]
    while todo:
        p = todo.pop(0)
        order.append(p)
        todo += sorted(children(p))
    return order


def stat_fields(pid):
    s = read(f"/proc/{pid}/stat")
    comm = s[s.index("(") + 1 : s.rindex(")")]
    rest = s[s.rindex(")") + 2 :].split()
    # state ppid pgrp session tty_nr ...
    return comm, rest[0], int(rest[1]), int(rest[2]), int(rest[3]), int(rest[4])


def fds(pid):
    out = {}
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for fd in sorted(names, key=int):
        try:
            out[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            pass
    return out


def all_holders():
    """inode target string ('socket:[N]', 'pipe:[N]') -> set of pids, system-wide."""
    holders = collections.defaultdict(set)
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        for target in fds(int(d)).values():
            if target.startswith(("socket:[", "pipe:[")):
                holders[target].add(int(d))
    return holders


def hex_addr(s):
    addr, port = s.split(":")
    port = int(port, 16)
    if len(addr) == 8:
        ip = ".".join(str(int(addr[i : i + 2], 16)) for i in (6, 4, 2, 0))
    else:
        words = [addr[i : i + 8] for i in range(0, 32, 8)]
        ip = f"[{ipaddress.IPv6Address(b''.join(bytes.fromhex(w)[::-1] for w in words))}]"
    return f"{ip}:{port}"


TCP_STATES = {
    "01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1", "05": "FIN_WAIT2",
    "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0A": "LISTEN",
    "0B": "CLOSING",
}


def inet_sockets(pid):
    """inode -> dict for TCP/UDP sockets of pid's network namespace."""
    socks = {}
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        lines = read(f"/proc/{pid}/net/{proto}").splitlines()[1:]
        for line in lines:
            f = line.split()
            tx, rx = f[4].split(":")
            socks[f[9]] = {
                "proto": proto, "local": hex_addr(f[1]), "peer": hex_addr(f[2]),
                "state": TCP_STATES.get(f[3], f[3]) if proto.startswith("tcp") else
                ("connected" if f[3] == "01" else "unconnected"),
                "sendq": int(tx, 16), "recvq": int(rx, 16),
            }
    return socks


def unix_sockets():
    """inode -> dict from `ss -xan` (gives the peer inode, which /proc/net/unix lacks)."""
    socks = {}
    out = subprocess.run(["ss", "-xanH"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) < 8:
            continue
        socks[f[5]] = {
            "type": f[0], "state": f[1], "recvq": int(f[2]), "sendq": int(f[3]),
            "path": "" if f[4] == "*" else f[4], "peer": f[7],
        }
    return socks


def fdinfo(pid, fd):
    lines = read(f"/proc/{pid}/fdinfo/{fd}").splitlines()
    keep = [l for l in lines if not l.startswith(("pos:", "flags:", "mnt_id:", "ino:"))]
    return "; ".join(re.sub(r"\s+", " ", l.strip()) for l in keep)


def shared_maps(pid):
    out = []
    for line in read(f"/proc/{pid}/maps").splitlines():
        f = line.split(None, 5)
        if len(f) >= 2 and f[1][3] == "s":
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            out.append((f[1], (hi - lo) // 1024, f[5] if len(f) > 5 else "(anonymous)"))
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: job_inventory.py ROOT_PID")
    root = int(sys.argv[1])
    members = tree(root)
    inset = set(members)
    holders = all_holders()
    inet = inet_sockets(root)
    unix = unix_sockets()
    # (local, peer) -> socket inode, to find the other end of a TCP connection
    by_pair = {(s["local"], s["peer"]): ino for ino, s in inet.items()}
    sock_owner = {}
    for p in members:
        for fd, t in fds(p).items():
            if t.startswith("socket:["):
                sock_owner.setdefault(t[8:-1], (p, fd))

    print(f"### Process tree (root {root})\n")
    print("| pid | ppid | pgid | sid | tty_nr | comm | threads (comm) |")
    print("|---|---|---|---|---|---|---|")
    for p in members:
        comm, _, ppid, pgid, sid, tty = stat_fields(p)
        threads = [read(f"/proc/{p}/task/{t}/comm").strip()
                   for t in sorted(os.listdir(f"/proc/{p}/task"), key=int)]
        print(f"| {p} | {ppid} | {pgid} | {sid} | {tty} | {comm} | {len(threads)}: "
              f"{', '.join(threads)} |")
    print()

    for p in members:
        comm = stat_fields(p)[0]
        print(f"### {comm} {p}\n")
        print("| fd | object | details |")
        print("|---|---|---|")
        for fd, t in fds(p).items():
            detail = ""
            if t.startswith("socket:["):
                ino = t[8:-1]
                if ino in inet:
                    s = inet[ino]
                    detail = f"{s['proto']} {s['state']} {s['local']}"
                    if s["state"] not in ("LISTEN", "unconnected"):
                        peer = by_pair.get((s["peer"], s["local"]))
                        where = (f"peer in job ({'%d fd %d' % sock_owner[peer]})"
                                 if peer in sock_owner else "peer OUTSIDE the job")
                        detail += f" -> {s['peer']}, {where}"
                    detail += f", sendq {s['sendq']} recvq {s['recvq']}"
                elif ino in unix:
                    s = unix[ino]
                    detail = f"unix {s['type']} {s['state']} path '{s['path']}'"
                    if s["peer"] not in ("0", "*"):
                        where = (f"peer in job ({'%d fd %d' % sock_owner[s['peer']]})"
                                 if s["peer"] in sock_owner else "peer OUTSIDE the job")
                        detail += f", peer inode {s['peer']} {where}"
                    detail += f", sendq {s['sendq']} recvq {s['recvq']}"
                else:
                    detail = "socket of another family (netlink?): " + fdinfo(p, fd)
            elif t.startswith("anon_inode:"):
                detail = fdinfo(p, fd)
            elif t == "/dev/ptmx":
                detail = fdinfo(p, fd)
                idx = re.search(r"tty-index: (\d+)", detail)
                if idx:
                    slaves = [(q, f) for q in members for f, u in fds(q).items()
                              if u == f"/dev/pts/{idx.group(1)}"]
                    detail += f"; pty master of /dev/pts/{idx.group(1)}, held in the job by {slaves}"
            elif t.startswith("/dev/pts/"):
                masters = [(q, f) for q in members for f, u in fds(q).items() if u == "/dev/ptmx"
                           and re.search(rf"tty-index:\s+{t[9:]}\b", read(f"/proc/{q}/fdinfo/{f}"))]
                detail = f"pty slave; its master in the job: {masters or 'none'}"
            if t.startswith(("socket:[", "pipe:[")):
                others = sorted(holders[t] - {p})
                inside = [o for o in others if o in inset]
                outside = [o for o in others if o not in inset]
                if inside:
                    detail += f"; also held by job members {inside}"
                if outside:
                    detail += f"; ALSO HELD OUTSIDE the job by {outside}"
            print(f"| {fd} | `{t}` | {detail} |")
        maps = shared_maps(p)
        if maps:
            print("\nMAP_SHARED mappings:\n")
            for perms, kib, path in maps:
                print(f"- `{perms}` {kib} KiB `{path}`")
        print()

    print("### SysV shared memory attached by the job\n")
    out = subprocess.run(["ipcs", "-mp"], capture_output=True, text=True).stdout
    rows = [l.split() for l in out.splitlines() if l[:1].isdigit()]
    segs = subprocess.run(["ipcs", "-m"], capture_output=True, text=True).stdout
    info = {l.split()[1]: l.split() for l in segs.splitlines() if l.startswith("0x")}
    found = False
    for r in rows:
        shmid, cpid, lpid = r[0], int(r[2]), int(r[3])
        if cpid in inset or lpid in inset:
            i = info.get(shmid, [])
            print(f"- shmid {shmid} key {i[0] if i else '?'} perms {i[3] if i else '?'} "
                  f"bytes {i[4] if i else '?'} nattch {i[5] if i else '?'} "
                  f"status {' '.join(i[6:]) if len(i) > 6 else '-'} creator {cpid} last {lpid}")
            found = True
    if not found:
        print("(none)")


if __name__ == "__main__":
    main()
