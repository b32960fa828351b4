#!/usr/bin/env bash
# levels_cost.sh BUILD [MIB] [CHECKPOINTS]: what a checkpoint costs on each
# level, in one run. A job of MIB MiB (default 1024; tests/e2e/programs/
# cr_work: a root and two workers, all rewriting their memory) runs under
# cr_run with three levels: the local level on /dev/shm, the partner level
# a cr_noded on this host (over loopback TCP, storing to /var/tmp), the
# shared level /var/tmp. One checkpoint every few seconds (a full, then
# incrementals), CHECKPOINTS of them (default 6). Prints, per level, the
# mean time from the start of a checkpoint until it is committed there
# (the local level: the job's checkpoint; the others: that plus the
# copy's own time) and the job's frozen time, then what cr_plan levels
# --from makes of them for a 6 h MTBF.
set -euo pipefail
BUILD=$(realpath "$1")
MIB=${2:-1024}
N=${3:-6}
W=$(mktemp -d /var/tmp/levels_cost.XXXXXX)
L1=/dev/shm/levels_cost.$$
NODED=0
cleanup() {
  ((NODED > 0)) && kill "$NODED" 2>/dev/null
  rm -rf "$W" "$L1"
}
trap cleanup EXIT
head -c 32 /dev/urandom >"$W/token"
chmod 600 "$W/token"
PORT=$((22000 + $$ % 20000))
"$BUILD/bin/cr_noded" --listen "127.0.0.1:$PORT" --token "$W/token" --dir "$W/partner" \
  2>"$W/noded.err" </dev/null &
NODED=$!
until ss -ltn | grep -q ":$PORT "; do sleep 0.05; done
# Each of the three processes holds a third; the job runs until killed.
per=$((MIB / 3))
"$BUILD/bin/cr_run" --dir "$W/ck" --local "$L1" --partner "127.0.0.1:$PORT" \
  --partner-token "$W/token" --interval 0 --incrementals 2 --json --log "$W/log" \
  -- "$BUILD/bin/e2e/cr_work" 100000 2 "$per" "$W/never" >/dev/null 2>&1 </dev/null &
CR=$!
until grep -q '"event":"start"' "$W/log" 2>/dev/null; do sleep 0.05; done
sleep 3
# One checkpoint at a time: the next once the previous reached both copies.
copied() { grep -c '"event":"flush"' "$W/log" || true; }
for i in $(seq "$N"); do
  before=$(copied)
  kill -USR1 "$CR"
  deadline=$((SECONDS + 300))
  until (($(copied) >= before + 2)); do
    ((SECONDS < deadline)) || { echo "no copy within 300 s" >&2; exit 1; }
    sleep 0.1
  done
done
kill -TERM "$CR"
wait "$CR" || true
python3 - "$W/log" <<'PY'
import json, statistics, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
ck = [e for e in ev if e["event"] == "checkpoint"]
fl = {lvl: [e for e in ev if e["event"] == "flush" and e["level"] == lvl] for lvl in ("partner", "shared")}
total = statistics.mean(e["total_seconds"] for e in ck)
frozen = statistics.mean(e["frozen_seconds"] for e in ck)
mib = statistics.mean(e["bytes"] for e in ck) / 2**20
print(f"{len(ck)} checkpoints, mean {mib:.0f} MiB, frozen {frozen:.3f} s")
print(f"local  (/dev/shm):           {total:.3f} s")
for lvl, name in (("partner", "partner (loopback, /var/tmp)"), ("shared", "shared  (/var/tmp)")):
    copy = statistics.mean(e["seconds"] for e in fl[lvl])
    print(f"{name}: {total + copy:.3f} s (the copy {copy:.3f} s, the job running)")
PY
"$BUILD/bin/cr_plan" levels --from "$W/ck" --mtbf 6h
