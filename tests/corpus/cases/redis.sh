#!/usr/bin/env bash
# redis-server in its default configuration (in the foreground, its data
# in its working directory) on a free port, holding 50,000 strings, a hash
# and a list written through redis-cli; checkpointed (cr_full), written
# again, checkpointed (cr_incr), killed, restored (cr_restart, which waits
# for it): redis-cli must read every key and value as they were at the
# incremental, then SHUTDOWN NOSAVE ends it with status 0.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
corpus_begin redis "$@"

PORT=$(free_port)
cli() { redis-cli -p "$PORT" "$@"; }
# digest: the server's own SHA-1 over every key and value, in key order.
DIGEST='local ks = redis.call("KEYS", "*") table.sort(ks) local acc = {}
for _, k in ipairs(ks) do
  local t = redis.call("TYPE", k).ok
  local v
  if t == "string" then v = redis.call("GET", k)
  elseif t == "hash" then v = table.concat(redis.call("HGETALL", k), ",")
  elseif t == "list" then v = table.concat(redis.call("LRANGE", k, 0, -1), ",") end
  acc[#acc + 1] = k .. "=" .. t .. ":" .. v
end
return redis.sha1hex(table.concat(acc, ";"))'
# load FROM TO: SET key:i "value-i-<i*i>" for i in FROM..TO (redis-cli --pipe).
load() {
  awk -v a="$1" -v b="$2" 'BEGIN { for (i = a; i <= b; i++) printf "SET key:%d value-%d-%.0f\n", i, i, i * i }' |
    cli --pipe >"$WORK/load.out" 2>&1 || fail "redis-cli --pipe: $(first_line "$WORK/load.out")"
}

start_bg redis redis-server --port "$PORT"
wait_until 30 "answer to PING" '[[ $(cli PING 2>/dev/null) == PONG ]]'
load 1 50000
cli HSET user:1 name ada lang fortran year 1957 >/dev/null
cli RPUSH queue a b c d >/dev/null
checkpoint full
load 40001 60000
cli SET key:7 changed >/dev/null
cli HSET user:1 year 1958 >/dev/null
cli LPOP queue >/dev/null
cli DEL key:3 >/dev/null
before=$(cli EVAL "$DIGEST" 0)
checkpoint incr
kill_tree
restore_bg
wait_restored
wait_until 30 "answer to PING after the restore" '[[ $(cli PING 2>/dev/null) == PONG ]]'
[[ $(cli DBSIZE) == 60001 ]] || fail "DBSIZE after the restore is $(cli DBSIZE), not 60001"
[[ $(cli GET key:7) == changed && $(cli GET key:59999) == value-59999-3599880001 ]] ||
  fail "GET key:7 and key:59999 after the restore: '$(cli GET key:7)' '$(cli GET key:59999)'"
[[ $(cli EXISTS key:3) == 0 ]] || fail "key:3, deleted before the incremental, is back"
[[ $(cli HGET user:1 year) == 1958 && $(cli LRANGE queue 0 -1 | tr '\n' ' ') == "b c d " ]] ||
  fail "hash or list after the restore: year $(cli HGET user:1 year), queue $(cli LRANGE queue 0 -1 | tr '\n' ' ')"
after=$(cli EVAL "$DIGEST" 0)
[[ $after == "$before" ]] || fail "the data set's digest after the restore is $after, at the incremental $before"
cli SET key:new written-after >/dev/null
[[ $(cli GET key:new) == written-after ]] || fail "the restored server does not take writes"
cli SHUTDOWN NOSAVE >/dev/null 2>&1 || true
finish_restored 30
corpus_pass "redis $(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p')"
