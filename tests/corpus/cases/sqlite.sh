#!/usr/bin/env bash
# sqlite3 DB < SCRIPT: one long transaction (a table and an index filled
# and updated in 180 statements, far beyond sqlite's page cache, so pages
# and the rollback journal are written while it runs), checkpointed while
# it runs, killed, restored: the database must pass PRAGMA integrity_check
# and hold what an uninterrupted run's holds.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
corpus_begin sqlite "$@"

STEPS=60
{
  echo "CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, v TEXT);"
  echo "CREATE INDEX t_k ON t(k);"
  echo "BEGIN;"
  for ((n = 0; n < STEPS; n++)); do
    echo "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 6000)"
    echo "  INSERT INTO t(k, v) SELECT (i * 7919 + $n) % 100003, printf('%08d-%d-%s', i, $n, hex(i * $n)) FROM c;"
    echo "UPDATE t SET v = v || '+' WHERE k % 97 = $((n % 97));"
    echo "SELECT 'step', $n, count(*) FROM t;"
  done
  echo "COMMIT;"
} >"$WORK/fill.sql"
# What the database holds: its own integrity check, counts, and the sqlite3
# shell's SHA3 digest of every row.
CONTENT="PRAGMA integrity_check; SELECT count(*), sum(k), sum(length(v)) FROM t; SELECT hex(sha3_query('SELECT * FROM t ORDER BY id'));"

t=$EPOCHREALTIME
IN=$WORK/fill.sql run_fg ref sqlite3 ref.db
phase "uninterrupted" "$t"
run_fg refcheck sqlite3 ref.db "$CONTENT"
grep -qx ok "$WORK/refcheck.out" || fail "the uninterrupted run's database: $(first_line "$WORK/refcheck.out")"
IN=$WORK/fill.sql start_bg run sqlite3 run.db
wait_until 60 "first statements" 'grep -q "^step|5|" "$WORK/run.out"'
checkpoint full
sleep 0.5
checkpoint incr
! grep -q "^step|$((STEPS - 1))|" "$WORK/run.out" || fail "the script finished before it was killed"
kill_tree
restore_wait
run_fg check sqlite3 run.db "$CONTENT"
cmp -s "$WORK/check.out" "$WORK/refcheck.out" ||
  fail "the restored run's database differs: $(tr '\n' ' ' <"$WORK/check.out"), uninterrupted: $(tr '\n' ' ' <"$WORK/refcheck.out")"
corpus_pass "sqlite $(sqlite3 --version | awk '{ print $1 }')"
