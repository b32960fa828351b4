#!/usr/bin/env bash
# untrack.sh BIN_DIR: cr_untrack hands a tracked process back clean. After a
# pagemap-scan cr_full the process holds the tracker's userfaultfd and
# write-protected pages; after cr_untrack it holds neither (no userfaultfd
# descriptor, no page with the uffd-wp bit in /proc/PID/pagemap), it keeps
# running, the chain's next cr_incr says tracking was lost and saves
# everything, and the chain restores to a program that passes its own
# byte-for-byte check. Bad input: a directory without a chain, and a chain
# whose process is gone, each one line and exit 1.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
BIN_DIR=$1
PROG_DIR=${E2E_PROG_DIR:-$BIN_DIR/e2e}
E2E_CASE="untrack" # for pass, fail and skip (lib.sh)
if ! "$BIN_DIR/cr_check" --json | grep -q '"pagemap-scan":{"detail":"[^"]*","ok":true'; then
  echo "SKIP untrack: this kernel cannot run the pagemap-scan tracker (see cr_check)"
  exit 77
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-untrack.XXXXXX")
install_traps
CKPT=$WORK/ckpt
: >"$WORK/hold"
(close_fds && E2E_HOLD_FILE=$WORK/hold exec "$PROG_DIR/heap_pattern" "$WORK/ready" 64 300 \
  </dev/null >"$WORK/prog.out" 2>"$WORK/prog.err") &
PID=$!
OWN_PIDS+=("$PID")
wait_file "$WORK/ready" "$PID" 60 || fail "target did not become ready"

uffds() { find "/proc/$PID/fd" -lname 'anon_inode:\[userfaultfd\]' | wc -l; }
# Pages of the process whose pagemap entry has the uffd-wp bit (57).
wp_pages() {
  python3 - "$PID" <<'PY'
import struct, sys
pid = sys.argv[1]
n = 0
with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/pagemap", "rb") as pm:
    for line in maps:
        lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
        if "[vsyscall]" in line:
            continue
        pm.seek(lo // 4096 * 8)
        data = pm.read((hi - lo) // 4096 * 8)
        n += sum(1 for (e,) in struct.iter_unpack("<Q", data) if e >> 57 & 1)
print(n)
PY
}

"$BIN_DIR/cr_full" --tracker pagemap-scan --dir "$CKPT" "$PID" >/dev/null 2>"$WORK/tool.err" ||
  fail "cr_full: $(first_line "$WORK/tool.err")"
(($(uffds) == 1)) || fail "no tracker userfaultfd in the process after cr_full"
before=$(wp_pages)
((before > 0)) || fail "no write-protected page after cr_full: the check below could not fail"

"$BIN_DIR/cr_untrack" --dir "$CKPT" --json >"$WORK/untrack.json" 2>"$WORK/tool.err" ||
  fail "cr_untrack: $(first_line "$WORK/tool.err")"
grep -q '"released":1' "$WORK/untrack.json" || fail "cr_untrack released nothing: $(cat "$WORK/untrack.json")"
(($(uffds) == 0)) || fail "the process still holds a userfaultfd after cr_untrack"
after=$(wp_pages)
((after == 0)) || fail "$after pages still write-protected after cr_untrack ($before before)"
[[ $(proc_state "$PID") == [RSD] ]] || fail "the process is not running after cr_untrack ($(proc_state "$PID"))"

"$BIN_DIR/cr_incr" --json --dir "$CKPT" "$PID" >"$WORK/incr.json" 2>"$WORK/tool.err" ||
  fail "cr_incr after cr_untrack: $(first_line "$WORK/tool.err")"
grep -q '"tracker_reset":"[^"]' "$WORK/incr.json" ||
  fail "cr_incr trusted tracking that cr_untrack ended: $(head -c 300 "$WORK/incr.json")"

# Bad input.
mkdir "$WORK/empty"
rc=0
"$BIN_DIR/cr_untrack" --dir "$WORK/empty" 2>"$WORK/bad.err" || rc=$?
((rc == 1)) && [[ $(wc -l <"$WORK/bad.err") == 1 ]] || fail "no chain: exit $rc, $(cat "$WORK/bad.err")"

{ kill -9 "$PID" && wait "$PID"; } 2>/dev/null || true
rc=0
"$BIN_DIR/cr_untrack" --dir "$CKPT" 2>"$WORK/bad.err" || rc=$?
((rc == 1)) && grep -q "no process with PID $PID" "$WORK/bad.err" ||
  fail "process gone: exit $rc, $(cat "$WORK/bad.err")"

rm -f "$WORK/hold"
rc=0
timeout 120 "$BIN_DIR/cr_restart" --dir "$CKPT" </dev/null >/dev/null 2>"$WORK/restart.err" || rc=$?
((rc == 0)) || fail "restored program $(describe_status "$rc"): $(first_line "$WORK/restart.err") $(tail -n 2 "$WORK/prog.err")"
grep -q '^done ' "$WORK/prog.out" || fail "the restored program printed no done line"
echo "PASS untrack ($before write-protected pages before cr_untrack, 0 after)"
