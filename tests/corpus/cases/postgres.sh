#!/usr/bin/env bash
# PostgreSQL 15 as Debian builds it: a cluster made by initdb (default
# postgresql.conf but for the port), started by pg_ctl (the postmaster,
# daemonized, and its checkpointer, background writer, WAL writer,
# autovacuum and logical replication launchers), a table written by psql;
# the postmaster and its children checkpointed as a tree (cr_full, cr_incr
# after more writes), killed, restored detached: psql must read the table
# as it was, write to it, then pg_ctl stop ends the postmaster.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
corpus_begin postgres "$@"

PG=/usr/lib/postgresql/15/bin
PORT=$(free_port)
AS_PG=(runuser -u postgres --)
as_pg() { "${AS_PG[@]}" "$@"; }
sql() { as_pg "$PG/psql" -X -q -p "$PORT" -d postgres -Atc "$1"; }
# Debian's socket directory: what a killed postmaster leaves there.
CLEANUP_CMDS+=("rm -f /var/run/postgresql/.s.PGSQL.$PORT /var/run/postgresql/.s.PGSQL.$PORT.lock")
install -d -o postgres -g postgres -m 700 "$WORK/data"
install -o postgres -g postgres -m 600 /dev/null "$WORK/pg.log"
LOGS+=("$WORK/pg.log")
run_fg initdb "${AS_PG[@]}" "$PG/initdb" -D "$WORK/data"
run_fg start "${AS_PG[@]}" "$PG/pg_ctl" -D "$WORK/data" -l "$WORK/pg.log" -o "-p $PORT" -w start
ROOT=$(head -n 1 "$WORK/data/postmaster.pid")
TREE=1
sql "CREATE TABLE t AS SELECT i, md5(i::text) AS v FROM generate_series(1, 200000) AS i" ||
  fail "CREATE TABLE: $(last_err)"
CONTENT="SELECT count(*), sum(i), md5(string_agg(v, ',' ORDER BY i)) FROM t"
checkpoint full
sql "INSERT INTO t SELECT i, md5(i::text) FROM generate_series(200001, 250000) AS i; UPDATE t SET v = 'x' || v WHERE i % 1000 = 0; DELETE FROM t WHERE i % 777 = 0"
before=$(sql "$CONTENT")
children=$(($(tree_pids "$ROOT" | wc -l) - 1))
checkpoint incr
kill_tree
restore_detach
wait_until 60 "answer after the restore" 'as_pg "$PG/pg_isready" -q -p "$PORT"'
after=$(sql "$CONTENT") || fail "psql after the restore: $(last_err)"
[[ $after == "$before" ]] || fail "the table after the restore: $after, at the incremental: $before"
sql "INSERT INTO t VALUES (0, 'after')" || fail "INSERT after the restore failed"
[[ $(sql "SELECT v FROM t WHERE i = 0") == after ]] || fail "the restored server does not keep a write"
run_fg stop "${AS_PG[@]}" "$PG/pg_ctl" -D "$WORK/data" -m fast -w stop
! alive "$ROOT" || fail "the restored postmaster is still running after pg_ctl stop"
corpus_pass "postmaster and $children children"
