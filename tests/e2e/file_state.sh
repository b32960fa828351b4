#!/usr/bin/env bash
# file_state.sh BIN_DIR TEST: files, locks and the files of a job that vanish
# with it (docs/state.md, "Files and descriptors").
#
#   tmp-vanish       programs/fd_tmpfiles in a session directory under /tmp
#                    (on disk or tmpfs, whatever this machine has): cr_full,
#                    the directory removed (as a compiler's cleanup or a
#                    launcher's epilog does), kill, cr_restart: the files,
#                    FIFO, lock, mapping and working directory come back and
#                    the program passes its checks
#   missing-unsaved  the same in a directory outside the temporary
#                    directories: the restore refuses with one line naming
#                    what is missing and why it was not saved, and starts
#                    nothing (also with --force)
#   too-large        the session directory under /tmp with a 2 MiB mapping
#                    and cr_full --scratch-max 1: that file is not saved
#                    (the others are); once removed, the restore refuses
#                    naming it and its size
#   unheld-temp      a program that wrote a file in its TMPDIR (on disk),
#                    closed it and will read it by name later (as a compiler
#                    driver between two steps), and a file another program
#                    has there: cr_full, kill, the program's file removed and
#                    the other changed by its owner, cr_restart: the
#                    program's file comes back with its content, the other
#                    is left as it is now
#   append-log       a job whose output file in /tmp it only appends to (>>)
#                    while others append to it too (as a batch system's
#                    output file): cr_full, more lines from outside, kill,
#                    cr_restart: nothing written after the checkpoint is
#                    lost, and the restored job's lines follow them; once
#                    the file is removed, a restore makes it again from the
#                    checkpoint
#   sqlite, sqlite-wal
#                    sqlite3 (Debian's sqlite3) in a transaction (rollback
#                    journal, or WAL), checkpointed, killed, restored; another
#                    sqlite3 then finds the database locked (and reads the
#                    committed rows only), the restored one goes on and
#                    commits; PRAGMA integrity_check and the row count after
# Prints "PASS file_state TEST" or "FAIL file_state TEST: reason"; exit 77:
# skip (no sqlite3).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

TESTS=(tmp-vanish missing-unsaved too-large unheld-temp append-log sqlite sqlite-wal)
(($# == 2)) && [[ " ${TESTS[*]} " == *" $2 "* ]] || {
  echo "usage: $0 BIN_DIR ${TESTS[*]// /|}" >&2
  exit 2
}
BIN_DIR=$(cd "$1" && pwd)
TEST=$2
PROG_DIR=${E2E_PROG_DIR:-$BIN_DIR/e2e}
TOOL_TIMEOUT=60
E2E_CASE="file_state $TEST"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-e2e-files.XXXXXX")
install_traps
LOGS=("$WORK/prog.err" "$WORK/tool.err" "$WORK/sql.err")

tool() {
  TOOL_RC=0
  timeout "$TOOL_TIMEOUT" "$@" </dev/null >"$WORK/tool.out" 2>"$WORK/tool.err" || TOOL_RC=$?
}

# start_tmpfiles DIR [MAP_KIB]: programs/fd_tmpfiles in DIR; sets TPID.
start_tmpfiles() {
  (close_fds && exec "$PROG_DIR/fd_tmpfiles" "$WORK/ready" "$@" </dev/null >"$WORK/prog.out" 2>"$WORK/prog.err") &
  TPID=$!
  OWN_PIDS+=("$TPID")
  local rc=0
  wait_file "$WORK/ready" "$TPID" 30 || rc=$?
  ((rc == 0)) || fail "fd_tmpfiles did not become ready: $(first_line "$WORK/prog.err")"
}

kill_target() {
  { kill -9 "$TPID" || true; } 2>/dev/null
  { wait_exit "$TPID" 10; } 2>/dev/null || fail "target still there after kill -9"
}

# kill_shell_job: kill the shell $TPID and its children. The shell first:
# killed after a child, it would report that death on its stderr, which is
# the log under test.
kill_shell_job() {
  local kids
  kids=$(cat /proc/"$TPID"/task/*/children 2>/dev/null || true)
  # shellcheck disable=SC2086
  kill -9 "$TPID" $kids 2>/dev/null || true
  kill_target
}

# refused REGEX [ARGS]: cr_restart fails with one line matching REGEX, and
# no process runs the program.
refused() {
  local re=$1
  shift
  tool "$BIN_DIR/cr_restart" --dir "$WORK/ck" "$@"
  ((TOOL_RC != 0)) || fail "cr_restart $* succeeded"
  ((TOOL_RC < 124)) || fail "cr_restart $(describe_status "$TOOL_RC")"
  is_one_line "$WORK/tool.err" || fail "cr_restart $* failed without exactly one line on stderr"
  echo "  cr_restart $* -> $(first_line "$WORK/tool.err")"
  grep -Eq "$re" "$WORK/tool.err" || fail "message does not match /$re/"
  [[ $(proc_state "$TPID") == - ]] || fail "a process with the checkpointed PID $TPID exists"
  [[ ! -s $WORK/prog.err ]] || fail "the program ran: $(first_line "$WORK/prog.err")"
}

case $TEST in
  tmp-vanish)
    DIR=$(mktemp -d /tmp/ckpt-e2e-session.XXXXXX)
    EXTRA_DIRS+=("$DIR")
    start_tmpfiles "$DIR"
    tool "$BIN_DIR/cr_full" --dir "$WORK/ck" "$TPID"
    ((TOOL_RC == 0)) || fail "cr_full: $(first_line "$WORK/tool.err")"
    rm -rf "$DIR/sess" # while the program still runs, as a cleanup would
    kill_target
    tool "$BIN_DIR/cr_restart" --dir "$WORK/ck"
    ((TOOL_RC == 0)) || fail "cr_restart $(describe_status "$TOOL_RC"): $(first_line "$WORK/tool.err") $(first_line "$WORK/prog.err")"
    grep -q "^done $TPID " "$WORK/prog.out" || fail "the restored program did not finish"
    pass "/tmp is $(stat -f -c %T /tmp)"
    ;;
  missing-unsaved)
    ondisk_dir
    start_tmpfiles "$ONDISK"
    tool "$BIN_DIR/cr_full" --dir "$WORK/ck" "$TPID"
    ((TOOL_RC == 0)) || fail "cr_full: $(first_line "$WORK/tool.err")"
    kill_target
    rm -rf "$ONDISK/sess"
    why="no longer exists, and the checkpoint did not save it: only files on tmpfs or in a temporary directory \(/tmp, /var/tmp, the job's TMPDIR\) are saved, others are reopened by path$"
    refused "^cr_restart: working directory $ONDISK/sess/sub: $why"
    refused "^cr_restart: working directory $ONDISK/sess/sub: $why" --force
    mkdir -p "$ONDISK/sess/sub"
    refused "^cr_restart: (fd [0-9]+|mapping 0x[0-9a-f]+-0x[0-9a-f]+): $ONDISK/sess/sub/[a-z.]+: $why"
    pass
    ;;
  too-large)
    DIR=$(mktemp -d /tmp/ckpt-e2e-session.XXXXXX)
    EXTRA_DIRS+=("$DIR")
    start_tmpfiles "$DIR" 2048
    tool "$BIN_DIR/cr_full" --dir "$WORK/ck" --scratch-max 1 "$TPID"
    ((TOOL_RC == 0)) || fail "cr_full: $(first_line "$WORK/tool.err")"
    kill_target
    rm -rf "$DIR/sess"
    refused "^cr_restart: mapping 0x[0-9a-f]+-0x[0-9a-f]+: $DIR/sess/sub/map.bin: no longer exists, and the checkpoint did not save it: its 2097152 bytes were more than was left of what a checkpoint saves of a process's files in temporary directories \(--scratch-max\)$"
    pass
    ;;
  unheld-temp)
    ondisk_dir
    TD=$ONDISK/tmpdir
    mkdir "$TD"
    (close_fds && TMPDIR=$TD exec bash -c 'echo "the program'"'"'s own" >"$TMPDIR/step.s"
      echo ready >"$0/ready"
      while [[ ! -e $0/gate ]]; do sleep 0.05; done
      cat "$TMPDIR/step.s" "$TMPDIR/other.txt"' "$WORK" </dev/null >"$WORK/prog.out" 2>"$WORK/prog.err") &
    TPID=$!
    OWN_PIDS+=("$TPID")
    wait_file "$WORK/ready" "$TPID" 30 || fail "the program did not start"
    echo "someone else's, then" >"$TD/other.txt"
    tool "$BIN_DIR/cr_full" --tree --dir "$WORK/ck" "$TPID"
    ((TOOL_RC == 0)) || fail "cr_full: $(first_line "$WORK/tool.err")"
    kill_shell_job
    # The program's file goes (its next step would have removed it); the
    # other is changed by its owner meanwhile: the restore must not undo that.
    rm "$TD/step.s"
    echo "someone else's, now" >"$TD/other.txt"
    tool "$BIN_DIR/cr_restart" --dir "$WORK/ck" --detach
    ((TOOL_RC == 0)) || fail "cr_restart: $(first_line "$WORK/tool.err")"
    touch "$WORK/gate"
    for _ in $(seq 100); do [[ -s $WORK/prog.out ]] && break; sleep 0.1; done
    sleep 0.2
    [[ $(<"$WORK/prog.out") == "the program's own"$'\n'"someone else's, now" ]] ||
      fail "the restored program read '$(tr '\n' '|' <"$WORK/prog.out")'"
    pass "the file the program made came back, the one changed meanwhile was left"
    ;;
  append-log)
    ondisk_dir
    TD=$ONDISK/tmpdir  # the job's TMPDIR, on disk
    mkdir "$TD"
    LOGF=$TD/job.out
    echo "launcher: started" >"$LOGF"
    (close_fds && TMPDIR=$TD exec bash -c 'echo "job: before"
      echo ready >"$0/ready"
      while [[ ! -e $0/gate ]]; do sleep 0.05; done
      echo "job: after"' "$WORK" </dev/null >>"$LOGF" 2>&1) &
    TPID=$!
    OWN_PIDS+=("$TPID")
    wait_file "$WORK/ready" "$TPID" 30 || fail "the program did not start"
    tool "$BIN_DIR/cr_full" --tree --dir "$WORK/ck" "$TPID"
    ((TOOL_RC == 0)) || fail "cr_full: $(first_line "$WORK/tool.err")"
    echo "launcher: checkpointed" >>"$LOGF"
    kill_shell_job
    cp "$LOGF" "$WORK/saved.out"
    tool "$BIN_DIR/cr_restart" --dir "$WORK/ck" --detach
    ((TOOL_RC == 0)) || fail "cr_restart: $(first_line "$WORK/tool.err")"
    touch "$WORK/gate"
    for _ in $(seq 100); do grep -q "job: after" "$LOGF" && break; sleep 0.1; done
    want=$'launcher: started\njob: before\nlauncher: checkpointed\njob: after'
    [[ $(<"$LOGF") == "$want" ]] || fail "the log holds '$(tr '\n' '|' <"$LOGF")'"
    # Gone (a reboot, another node): made again from the checkpoint.
    rm "$LOGF" "$WORK/gate"
    tool "$BIN_DIR/cr_restart" --dir "$WORK/ck" --detach
    ((TOOL_RC == 0)) || fail "cr_restart without the log: $(first_line "$WORK/tool.err")"
    touch "$WORK/gate"
    for _ in $(seq 100); do grep -q "job: after" "$LOGF" 2>/dev/null && break; sleep 0.1; done
    want=$'launcher: started\njob: before\njob: after'
    [[ $(<"$LOGF") == "$want" ]] || fail "the remade log holds '$(tr '\n' '|' <"$LOGF")'"
    pass "what others appended after the checkpoint stays; a removed log comes back"
    ;;
  sqlite | sqlite-wal)
    command -v sqlite3 >/dev/null || skip "no sqlite3 (Debian's sqlite3)"
    DB=$WORK/t.db
    sql() { timeout 20 sqlite3 -cmd ".timeout ${SQL_WAIT_MS:-2000}" "$DB" "$@"; }
    sql "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100)
         INSERT INTO t(v) SELECT 'committed ' || i FROM n;" || fail "making the database"
    [[ $TEST == sqlite-wal ]] && { [[ $(sql "PRAGMA journal_mode=WAL;") == wal ]] || fail "no WAL mode"; }
    # The CLI reads its commands from a pipe this script holds (fd 0: a
    # restore connects it to cr_restart's own stdin).
    coproc SQL { close_fds && exec sqlite3 "$DB" >"$WORK/sql.out" 2>"$WORK/sql.err"; }
    TPID=$SQL_PID
    OWN_PIDS+=("$TPID")
    printf '%s\n' "BEGIN;" \
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000) INSERT INTO t(v) SELECT 'in flight ' || i FROM n;" \
      "SELECT 'marker', count(*) FROM t;" >&"${SQL[1]}"
    deadline=$((SECONDS + 20))
    until grep -q '^marker|1100$' "$WORK/sql.out"; do
      ((SECONDS < deadline)) || fail "sqlite3 did not run the transaction: $(first_line "$WORK/sql.err")"
      sleep 0.05
    done
    tool "$BIN_DIR/cr_full" --dir "$WORK/ck" "$TPID"
    ((TOOL_RC == 0)) || fail "cr_full of sqlite3 in a transaction: $(first_line "$WORK/tool.err")"
    kill_target
    # Restored with a FIFO as its stdin, fed from here once it runs.
    mkfifo "$WORK/in"
    timeout "$TOOL_TIMEOUT" "$BIN_DIR/cr_restart" --dir "$WORK/ck" --detach <"$WORK/in" \
      >"$WORK/restart.out" 2>"$WORK/tool.err" &
    RPID=$!
    exec {FEED}>"$WORK/in"
    rc=0
    wait "$RPID" || rc=$?
    ((rc == 0)) || fail "cr_restart $(describe_status "$rc"): $(first_line "$WORK/tool.err")"
    # Its locks are back: another writer is refused, a reader sees only
    # what was committed (without the locks it would take the open
    # transaction's journal for a crash's and roll it back).
    if SQL_WAIT_MS=0 sql "INSERT INTO t(v) VALUES ('intruder');" 2>"$WORK/intruder.err"; then
      fail "another sqlite3 could write while the restored one holds a transaction"
    fi
    grep -q 'database is locked' "$WORK/intruder.err" || fail "intruder: $(first_line "$WORK/intruder.err")"
    got=$(sql "SELECT count(*) FROM t;") || fail "a reader failed"
    [[ $got == 100 ]] || fail "a reader sees $got rows, not the 100 committed ones"
    printf '%s\n' "INSERT INTO t(v) VALUES ('after the restore');" "COMMIT;" \
      "SELECT 'final', count(*) FROM t;" "PRAGMA integrity_check;" ".quit" >&"$FEED"
    exec {FEED}>&-
    wait_exit_any() {
      local deadline=$((SECONDS + 20))
      while [[ $(proc_state "$TPID") != [Z-] ]]; do
        ((SECONDS < deadline)) || fail "the restored sqlite3 did not finish"
        sleep 0.05
      done
    }
    wait_exit_any
    grep -q '^final|1101$' "$WORK/sql.out" || fail "the restored sqlite3 did not commit 1101 rows: $(tail -n 3 "$WORK/sql.out" | tr '\n' ' ') $(first_line "$WORK/sql.err")"
    [[ $(tail -n 1 "$WORK/sql.out") == ok ]] || fail "its integrity_check: $(tail -n 1 "$WORK/sql.out")"
    [[ ! -s $WORK/sql.err ]] || fail "sqlite3: $(first_line "$WORK/sql.err")"
    [[ $(sql "PRAGMA integrity_check;") == ok ]] || fail "integrity_check afterwards failed"
    got=$(sql "SELECT count(*) FROM t;")
    [[ $got == 1101 ]] || fail "$got rows afterwards, expected 1101"
    pass
    ;;
esac
