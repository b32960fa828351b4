# shellcheck shell=bash disable=SC2034 # NETNS_WHY is read by the sourcing scripts
# "Nodes" for the migration and multi-node tests (migrate.sh,
# job_migrate.sh, mpi_move.sh, tcp_outside.sh, mpi_nodes.sh): network
# namespaces joined by a veth pair, or by a bridge (netns_switch). Sourced.

# netns_pair NS_A NS_B NET LINK: creates NS_A (address NET.1) and NS_B
# (NET.2), NET a /24 prefix such as 10.252.7, joined by the veth pair
# LINK-A/LINK-B, every link up. Returns 1 with the reason in NETNS_WHY when
# this machine cannot (no iproute2, no privilege): the caller skips.
netns_pair() {
  local a=$1 b=$2 net=$3 link=$4 ns
  command -v ip >/dev/null || { NETNS_WHY="no ip command (iproute2)"; return 1; }
  { ip netns add "$a" && ip netns add "$b"; } || { NETNS_WHY="cannot create network namespaces"; return 1; }
  ip link add "$link-A" type veth peer name "$link-B" || { NETNS_WHY="cannot create a veth pair"; return 1; }
  ip link set "$link-A" netns "$a"
  ip link set "$link-B" netns "$b"
  ip -n "$a" addr add "$net.1/24" dev "$link-A"
  ip -n "$b" addr add "$net.2/24" dev "$link-B"
  for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
  ip -n "$a" link set "$link-A" up
  ip -n "$b" link set "$link-B" up
}

# netns_remove NS...: the namespaces go (their veth ends with them).
netns_remove() {
  local ns
  for ns in "$@"; do ip netns del "$ns" 2>/dev/null || true; done
}

# kill_tree PID: SIGKILL to PID's descendants, then PID (ip netns exec and
# unshare stand between the test and the tool).
kill_tree() {
  local c
  for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do kill_tree "$c"; done
  kill -9 "$1" 2>/dev/null || true
}

# wait_listening NS PORT PID: waits (10 s at most) until a TCP socket in
# namespace NS listens on PORT. Returns 0 then, 1 if PID ended first, 2 on
# timeout.
wait_listening() {
  local i
  for ((i = 0; i < 200; i++)); do
    [[ -n $(ip netns exec "$1" ss -Hltn "sport = :$2" 2>/dev/null) ]] && return 0
    [[ -e /proc/$3 ]] || return 1
    sleep 0.05
  done
  return 2
}

# start_ns_receiver NS ADDR:PORT [ARGS...]: cr_recv --once ($BIN_DIR) in
# namespace NS with the token $WORK/token, output in $WORK/recv.out and
# recv.err, in a PID namespace of its own unless SAME_PIDS=1. Sets RPID and
# appends it to RPIDS (for the caller's cleanup); fails unless it listens.
start_ns_receiver() {
  local ns=$1 addr=$2 rc=0
  shift 2
  local pidns=(unshare --pid --fork --mount-proc --kill-child)
  [[ ${SAME_PIDS:-0} == 1 ]] && pidns=()
  (close_fds && exec ip netns exec "$ns" "${pidns[@]}" \
    "$BIN_DIR/cr_recv" --listen "$addr" --token "$WORK/token" --once "$@" \
    </dev/null >"$WORK/recv.out" 2>"$WORK/recv.err") &
  RPID=$!
  RPIDS+=("$RPID")
  wait_listening "$ns" "${addr##*:}" "$RPID" || rc=$?
  ((rc != 1)) || fail "cr_recv ended before listening: $(first_line "$WORK/recv.err")"
  ((rc == 0)) || fail "cr_recv not listening after 10 s"
}

# start_noded NS ADDR:PORT TOKEN DIR ERR LIST: a cr_noded agent ($BIN_DIR) in
# namespace NS, stderr to ERR, its PID appended to the array named LIST (for
# the caller's cleanup) before it listens; fails with the agent's first line.
start_noded() {
  local -n started=$6
  (close_fds && exec ip netns exec "$1" "$BIN_DIR/cr_noded" --listen "$2" --token "$3" \
    --dir "$4" </dev/null >/dev/null 2>"$5") &
  started+=($!)
  wait_listening "$1" "${2##*:}" "$!" || fail "cr_noded in $1 is not listening: $(first_line "$5")"
}

# netns_switch SW NET LINK NS...: a "switch" namespace SW holding a bridge,
# and each NS (the i-th gets address NET.i) attached to it by a veth pair
# LINKi-n (in NS) / LINKi-s (in SW). A node can then go (its namespace
# deleted) without taking the others' links with it, and a spare can be
# attached with the address of the one that went (netns_attach).
netns_switch() {
  local sw=$1 net=$2 link=$3 i=1 ns
  shift 3
  command -v ip >/dev/null || { NETNS_WHY="no ip command (iproute2)"; return 1; }
  ip netns add "$sw" || { NETNS_WHY="cannot create network namespaces"; return 1; }
  ip -n "$sw" link add br0 type bridge || { NETNS_WHY="cannot create a bridge"; return 1; }
  ip -n "$sw" link set br0 up
  for ns in "$@"; do
    ip netns add "$ns" || { NETNS_WHY="cannot create network namespaces"; return 1; }
    netns_attach "$sw" "$ns" "$net.$i" "$link$i" || return 1
    i=$((i + 1))
  done
}

# netns_attach SW NS ADDR LINK: NS (existing) joins the bridge of SW with ADDR/24.
netns_attach() {
  local sw=$1 ns=$2 addr=$3 link=$4
  ip link add "$link-n" type veth peer name "$link-s" || { NETNS_WHY="cannot create a veth pair"; return 1; }
  ip link set "$link-n" netns "$ns"
  ip link set "$link-s" netns "$sw"
  ip -n "$sw" link set "$link-s" master br0
  ip -n "$sw" link set "$link-s" up
  ip -n "$ns" addr add "$addr/24" dev "$link-n"
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "$link-n" up
}
