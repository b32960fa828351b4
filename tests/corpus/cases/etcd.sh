#!/usr/bin/env bash
# etcd, a single-member cluster on free ports with its data directory in
# WORK (a Go program: a dozen threads that the Go runtime preempts with
# signals at any instant, epoll, its write-ahead log and a bbolt database
# mapped shared), holding 300 keys written through etcdctl; checkpointed
# (cr_full), written again, checkpointed (cr_incr), killed, restored
# detached: etcdctl must read every key as it was at the incremental, the
# store's revision must be the one it had then, and it must take a write.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
corpus_begin etcd "$@"

CLIENT=$(free_port)
PEER=$(free_port)
while [[ $PEER == "$CLIENT" ]]; do PEER=$(free_port); done
ctl() { ETCDCTL_API=3 etcdctl --endpoints="127.0.0.1:$CLIENT" "$@"; }
revision() { ctl endpoint status -w json | sed -n 's/.*"revision":\([0-9]*\).*/\1/p'; }
# load FROM TO: key/I = value-I-<I*I>, one etcdctl call per key.
load() {
  local i
  for ((i = $1; i <= $2; i++)); do ctl put "key/$i" "value-$i-$((i * i))" >/dev/null; done
}

start_bg etcd etcd --name corpus --data-dir "$WORK/data" \
  --listen-client-urls "http://127.0.0.1:$CLIENT" --advertise-client-urls "http://127.0.0.1:$CLIENT" \
  --listen-peer-urls "http://127.0.0.1:$PEER" --initial-advertise-peer-urls "http://127.0.0.1:$PEER" \
  --initial-cluster "corpus=http://127.0.0.1:$PEER"
wait_until 60 "etcd answering" 'ctl endpoint health >/dev/null 2>&1'
load 1 200
checkpoint full
load 181 300
ctl put key/7 changed >/dev/null
ctl del key/3 >/dev/null
before=$(revision)
checkpoint incr
kill_tree
restore_detach
wait_until 60 "etcd answering after the restore" 'ctl endpoint health >/dev/null 2>&1'
[[ $(revision) == "$before" ]] || fail "the revision after the restore is $(revision), at the incremental $before"
n=$(ctl get key/ --prefix --keys-only | grep -c .)
((n == 299)) || fail "$n keys after the restore, not 299"
[[ $(ctl get key/7 --print-value-only) == changed && $(ctl get key/299 --print-value-only) == value-299-89401 ]] ||
  fail "key/7 and key/299 after the restore: '$(ctl get key/7 --print-value-only)' '$(ctl get key/299 --print-value-only)'"
[[ -z $(ctl get key/3) ]] || fail "key/3, deleted before the incremental, is back"
ctl put key/new written-after >/dev/null
[[ $(ctl get key/new --print-value-only) == written-after ]] || fail "the restored etcd does not take writes"
corpus_pass "etcd $(etcd --version | sed -n 's/^etcd Version: //p')"
