# shellcheck shell=bash
# Sourced by mpi_nodes.sh for ACTION "move" (uses its variables and
# functions: job, last_iter, tree_pids, ...). The job computes over A and B;
# B's part (orted and its two ranks) is migrated to spare C (own network and
# PID namespace, agent at $MNET.3) with cr_job migrate --frozen while A's
# part keeps running: once B's part is frozen with its state on C, the
# takeover command moves B's job address $NET.2 to C (and flushes A's
# neighbour entry); C rebuilds the connections to A's ranks in repair mode.
# Then back from C to B with --live. A's processes are never stopped; the
# job must end with exactly the uninterrupted result. First a migration to
# an address where no agent listens: refused by name, B's part untouched.

# The address move, run by cr_job (in A's namespace) with CKPT_FROM/CKPT_TO.
cat >"$WORK/takeover" <<TAKEOVER
#!/bin/bash
set -e
where() {
  case \$1 in
    $MNET.2:*) echo "$NS_B crn$$2-n" ;;
    $MNET.3:*) echo "$NS_C crn$$c-n" ;;
    *) echo "takeover: unknown agent \$1" >&2; exit 1 ;;
  esac
}
read -r fns fdev <<<"\$(where "\$CKPT_FROM")"
read -r tns tdev <<<"\$(where "\$CKPT_TO")"
# The destination must hold its locks before the address arrives (A's
# retransmissions would meet resets there otherwise).
rules=\$(ip -n "\$tns" rule show; ip -n "\$tns" -6 rule show)
[[ \$rules == *"from $NET.2 "*blackhole* ]] || { echo "takeover: no lock in \$tns: \$rules" >&2; exit 1; }
ip -n "\$fns" addr del "$NET.2/24" dev "\$fdev" 2>/dev/null || true
ip -n "\$tns" addr replace "$NET.2/24" dev "\$tdev"
ip -n "$NS_A" neigh flush to "$NET.2" 2>/dev/null || true
echo "\$CKPT_FROM -> \$CKPT_TO, \$(grep -c blackhole <<<"\$rules") locks there" >>"$WORK/takeover.log"
TAKEOVER
chmod +x "$WORK/takeover"
LOGS+=("$WORK/nodedC.err")
# C is another machine: its own PID namespace too (B's part keeps its PIDs
# there while the frozen original still holds them on B).
(close_fds && exec ip netns exec "$NS_C" unshare --pid --fork --mount-proc "$BIN_DIR/cr_noded" \
  --listen "$MNET.3:$PORT" --token "$WORK/token" --dir "$WORK/ckC" </dev/null >/dev/null 2>"$WORK/nodedC.err") &
DAEMONS+=($!)
wait_listening "$NS_C" "$PORT" "$!" || fail "cr_noded in $NS_C is not listening: $(first_line "$WORK/nodedC.err")"
B_AGENT=$MNET.2:$PORT
C_AGENT=$MNET.3:$PORT
PART_B="$(tree_pids "$ORTED")"
untouched() { # $1: when; B's part (and A's) running, untraced, in B
  local p
  for p in $PART_B $(tree_pids "$MPIRUN"); do
    [[ $(tracer_of "$p") == 0 && $(proc_state "$p") != [tTZ-] ]] || fail "$1: process $p is not running untraced"
  done
  [[ $(ip netns identify "$ORTED") == "$NS_B" ]] || fail "$1: orted left B"
  [[ $(ip -n "$NS_B" addr show) == *"inet $NET.2/"* ]] || fail "$1: B lost its address"
}
progress() { # $1: iteration to pass
  local n=0
  until (($(last_iter) > $1)); do
    ((++n < 300)) || fail "the job stopped computing after iter $1"
    sleep 0.1
  done
}

# Bad input: no agent at the destination.
cp "$WORK/nodes" "$WORK/nodes.good"
at_bad=$(last_iter)
rc=0
job migrate --node "$B_AGENT" --to "$MNET.3:$((PORT + 1))" --takeover "$WORK/takeover" || rc=$?
((rc != 0)) || fail "cr_job migrate succeeded to an address where no agent listens"
grep -q "node $B_AGENT: .*$MNET.3:$((PORT + 1))" "$WORK/job.err" || fail "cr_job did not name the node and destination: $(first_line "$WORK/job.err")"
cmp -s "$WORK/nodes" "$WORK/nodes.good" || fail "the failed migration changed the node file"
[[ ! -e $WORK/takeover.log ]] || fail "the address moved for a migration that failed"
untouched "after the refused migration"
progress "$at_bad"

moved() { # $1: frozen|live, $2: JSON field
  grep -o "\"$2\":[0-9.e-]*" "$WORK/job.out" | cut -d: -f2 | xargs printf '%.3f'
}
# There (frozen).
at_there=$(last_iter)
job migrate --node "$B_AGENT" --to "$C_AGENT" --takeover "$WORK/takeover" || fail "cr_job migrate to C: $(first_line "$WORK/job.err")"
DOWN_THERE=$(moved frozen downtime_seconds) TOTAL_THERE=$(moved frozen total_seconds) TAKE_THERE=$(moved frozen takeover_seconds)
grep -q "^$C_AGENT [0-9]" "$WORK/nodes" || fail "the node file does not name C: $(cat "$WORK/nodes")"
for p in $PART_B; do
  for ((i = 0; i < 100; i++)); do [[ $(proc_state "$p") == [Z-] ]] && break; sleep 0.05; done
  [[ $(proc_state "$p") == [Z-] ]] || fail "process $p of B's part still exists on B after the migration"
done
[[ $(ip -n "$NS_C" addr show) == *"inet $NET.2/"* ]] || fail "C did not take B's address"
in_c=$(ip netns pids "$NS_C" | while read -r p; do
  if [[ $(cat /proc/"$p"/comm 2>/dev/null) == orted ]]; then echo "$p"; fi
done)
[[ -n $in_c ]] || fail "no orted in $NS_C after the migration"
progress "$at_there"
at_c=$(last_iter)
grep -q '^result: ' "$WORK/prog.out" && fail "the job finished before the back migration"

# And back (live).
sleep 1
job migrate --node "$C_AGENT" --to "$B_AGENT" --live --takeover "$WORK/takeover" || fail "cr_job migrate --live back to B: $(first_line "$WORK/job.err")"
DOWN_BACK=$(moved live downtime_seconds) TOTAL_BACK=$(moved live total_seconds) ROUNDS_BACK=$(grep -o '"rounds":[0-9]*' "$WORK/job.out" | cut -d: -f2)
grep -q "^$B_AGENT $ORTED\$" "$WORK/nodes" || fail "the node file does not name B with orted $ORTED: $(cat "$WORK/nodes")"
[[ $(cat /proc/"$ORTED"/comm 2>/dev/null) == orted && $(ip netns identify "$ORTED") == "$NS_B" ]] || fail "orted $ORTED is not back in $NS_B"
progress "$at_c"
at_back=$(last_iter)
for p in $(tree_pids "$MPIRUN"); do
  [[ $(tracer_of "$p") == 0 ]] || fail "process $p of A's part is traced"
done

rm -f "$PACE"
deadline=$((SECONDS + 300))
until grep -q '^result: ' "$WORK/prog.out"; do
  [[ $(proc_state "$MPIRUN") != [Z-] ]] || fail "the job ended without a result: $(tail -n 3 "$WORK/prog.err" | tr '\n' ' ')"
  ((SECONDS < deadline)) || fail "the job did not finish in 300 s after the migrations"
  sleep 0.2
done
for ((i = 0; i < 200; i++)); do [[ $(proc_state "$MPIRUN") == [Z-] ]] && break; sleep 0.05; done
rc=0
wait "$MPIRUN" || rc=$?
got=$(grep '^result: ' "$WORK/prog.out")
[[ $got == "$REF" ]] || fail "the migrated job's result differs: '$got', uninterrupted: '$REF'"
grep -qx 'check: ok' "$WORK/prog.out" || fail "the migrated job's self-check failed"
((rc == 0)) || fail "mpirun $(describe_status "$rc")"
pass "$(tr "\n" ";" <"$WORK/takeover.log") to C frozen at iter $at_there: downtime ${DOWN_THERE}s (address move ${TAKE_THERE}s), total ${TOTAL_THERE}s; back to B live at iter $at_c ($ROUNDS_BACK rounds): downtime ${DOWN_BACK}s, total ${TOTAL_BACK}s; job at iter $at_back after; reference run ${REF_TIME}s"
