#!/usr/bin/env bash
# cr_plan_cli.sh CR_PLAN: runs each cr_plan subcommand and checks its figures
# (text and --json) against shared/policy.md's reference values, and that
# nonsense gets exactly one line on stderr and a non-zero exit.
# Prints "PASS ..." / "FAIL ...": exit 0 when everything passed.
set -uo pipefail
PLAN=${1:?usage: $0 CR_PLAN}
failures=0
pass() { echo "PASS $1"; }
fail() {
  echo "FAIL $1"
  failures=$((failures + 1))
}

# ok NAME PATTERN ARGS...: exit 0, stdout matches the extended regex PATTERN.
ok() {
  local name=$1 pat=$2 out rc
  shift 2
  out=$("$PLAN" "$@" 2>/tmp/cr_plan_cli.err.$$)
  rc=$?
  if ((rc != 0)); then
    fail "$name: exit $rc: $(cat /tmp/cr_plan_cli.err.$$)"
  elif ! grep -Eq -- "$pat" <<<"$out"; then
    fail "$name: output does not match /$pat/: $out"
  else
    pass "$name"
  fi
}

# jq_ok NAME JQ_EXPR ARGS...: --json output for which the jq expression is true.
jq_ok() {
  local name=$1 expr=$2 out
  shift 2
  if ! out=$("$PLAN" "$@" --json 2>/tmp/cr_plan_cli.err.$$); then
    fail "$name: $(cat /tmp/cr_plan_cli.err.$$)"
  elif [[ $(jq -r "$expr" <<<"$out" 2>&1) != true ]]; then
    fail "$name: $expr is not true for $out"
  else
    pass "$name"
  fi
}

# bad NAME PATTERN ARGS...: non-zero exit, exactly one stderr line matching PATTERN, no stdout.
bad() {
  local name=$1 pat=$2 out rc lines
  shift 2
  out=$("$PLAN" "$@" 2>/tmp/cr_plan_cli.err.$$)
  rc=$?
  lines=$(wc -l </tmp/cr_plan_cli.err.$$)
  if ((rc == 0)); then
    fail "$name: exit 0 (stdout: $out)"
  elif ((lines != 1)); then
    fail "$name: $lines lines on stderr: $(cat /tmp/cr_plan_cli.err.$$)"
  elif ! grep -Eq -- "$pat" /tmp/cr_plan_cli.err.$$; then
    fail "$name: stderr does not match /$pat/: $(cat /tmp/cr_plan_cli.err.$$)"
  elif [[ -n $out ]]; then
    fail "$name: printed on stdout: $out"
  else
    pass "$name"
  fi
}
trap 'rm -f /tmp/cr_plan_cli.err.$$' EXIT

command -v jq >/dev/null || {
  echo "FAIL jq is missing (apt-get install jq)"
  exit 1
}

# --help of the tool and of every subcommand.
ok help 'interval.*incrementals.*migrate.*spares|spares' --help
for sub in interval incrementals migrate spares; do ok "help $sub" "--json" "$sub" --help; done

# interval: C = 23 s, MTBF 1.25 h: T* about 455 s; with p = 0.7 about 831 s.
ok interval.young-daly 'T\* = 455\.0 s' interval --C 23 --R 0 --mtbf 1.25h
ok interval.predicted 'T\* = 830\.7 s' interval --C 23 --R 0 --mtbf 4500 --predicted 0.7
jq_ok interval.json '(.young_daly.period_s | round) == 831 and .inputs.C.source == "flag"' \
  interval --C 23 --R 0 --mtbf 4500 --predicted 0.7
# 100 years per node, 36,500 nodes: a 1-day platform MTBF.
jq_ok interval.node-mtbf '.inputs.mtbf_s == 86400 and (.young_daly.period_s - (2*86400*60 | sqrt) | fabs) < 1e-6' \
  interval --C 60 --R 60 --node-mtbf 100y --nodes 36500
jq_ok interval.exact '.exact.period_s < .young_daly.period_s and .exact.overhead <= .young_daly.exact_overhead_at_period and .first_order_ok' \
  interval --C 60 --R 60 --mtbf 1d
jq_ok interval.silent '((.young_daly.period_s - (60 / (1/86400 + 1/(4*86400)) | sqrt)) | fabs) < 1e-6' \
  interval --C 50 --R 20 --V 10 --silent-mtbf 1d --mtbf 2d
ok interval.first-order-off 'first order is off' interval --C 1800 --R 600 --mtbf 3600
bad interval.negative-C 'checkpoint cost C must be a positive number' interval --C=-5 --R 0 --mtbf 3600
bad interval.p-one 'predicted fraction p must be in \[0, 1\)' interval --C 5 --R 0 --mtbf 3600 --predicted 1
bad interval.mtbf-short 'MTBF \(30 s\) must be longer than the checkpoint cost' interval --C 60 --R 0 --mtbf 30
# No R: Young/Daly (which does not use R), the exact formula said to be omitted.
ok interval.no-R 'T\* = 455\.0 s' interval --C 23 --mtbf 1.25h
ok interval.no-R-omitted '^omitted: the exact E\(T\).*need --R' interval --C 23 --mtbf 4500
jq_ok interval.no-R.json '(.young_daly.period_s | round) == 455 and .exact == null and .inputs.R == null and
  (.omitted | index("exact")) != null and (.young_daly | has("exact_overhead_at_period") | not)' \
  interval --C 23 --mtbf 1.25h
bad interval.no-mtbf 'need --mtbf' interval --C 60 --R 1
bad interval.both-mtbf 'not both' interval --C 60 --R 1 --mtbf 3600 --node-mtbf 1y --nodes 10
bad interval.garbage 'cannot read "abc"' interval --C abc --R 1 --mtbf 3600
bad interval.bad-unit 'cannot read "5 weeks"' interval --C 5 --R 1 --mtbf "5 weeks"
bad interval.nodes-fraction 'whole number' interval --C 5 --R 1 --node-mtbf 1y --nodes 2.5

# incrementals: S_1 = 16.64 - 1.17 = 15.47 s; m = ceil(0.7*20/(0.1*1.3) - 1) = 107.
ok incrementals.s1 'S_1 = 15\.47 s' incrementals --Of 20 --Oi 3.36 --Rf 4 --Rfi 5.17 --mtbf 1d --n 1
jq_ok incrementals.m '.incrementals == 107 and (.failure_probability - 0.1 | fabs) < 1e-9' \
  incrementals --Of 20 --Oi 6 --Rf 4 --Rfi 5.3 --mtbf 86400 --interval 9103.1485528
ok incrementals.no-limit 'no limit' incrementals --Of 20 --Oi 6 --Rf 4 --Rfi 4 --mtbf 1d
bad incrementals.negative 'O_i must not be negative' incrementals --Of 20 --Oi=-1 --Rf 4 --Rfi 5 --mtbf 1d
bad incrementals.mtbf-short 'longer than the full checkpoint cost' incrementals --Of 20 --Oi 1 --Rf 4 --Rfi 5 --mtbf 10
bad incrementals.missing 'need --Rfi' incrementals --Of 20 --Oi 1 --Rf 4 --mtbf 1d

# migrate: 1 GiB over 1 GbE (125 MB/s), 10 MB/s dirty, 0.5 s restart.
ok migrate.live '^mode live: ' migrate --lead 10 --dirty-rate 10M --resident 1Gi --bandwidth 125M --R 0.5
ok migrate.frozen '^mode frozen: ' migrate --lead 9.2 --dirty-rate 10M --resident 1Gi --bandwidth 125M --R 0.5
ok migrate.pause '^mode pause: ' migrate --lead 5 --dirty-rate 10M --resident 1Gi --bandwidth 125M --R 0.5
jq_ok migrate.json '.mode == "live" and (.live.rounds | length) == 4 and .live.stop_reason == "dirty set under the threshold"' \
  migrate --lead 10 --dirty-rate 10M --resident 1Gi --bandwidth 125M --R 0.5
ok migrate.back-yes 'migrate back: yes' migrate --remaining 1000 --degraded 1.2 --original 1 --migration-time 150
ok migrate.back-no 'migrate back: no' migrate --remaining 1000 --degraded 1.2 --original 1 --migration-time 250
bad migrate.zero-bandwidth 'bandwidth must be a positive number' migrate --lead 10 --dirty-rate 1M --resident 1Gi --bandwidth 0 --R 1
bad migrate.nothing 'need --lead' migrate --bandwidth 1G
bad migrate.back-partial 'needs --degraded' migrate --remaining 100 --original 1
bad migrate.no-chain 'no such|No such|missing|cannot' migrate --from /nonexistent/chain --lead 1 --bandwidth 1G --R 1

# spares: 24^3 with 3D(2,1) keeps 1128 spares (8.16 %).
ok spares.24cubed '13824 nodes \(24,24,24\), 1128 spares \(8\.16 %\)' spares --nodes 13824 --dims 3 --spare-dims 2 --thickness 1
jq_ok spares.formula '.spares == 1128 and ((.fraction - .fraction_formula) | fabs) < 1e-12' \
  spares --shape 24x24x24 --spare-dims 2
jq_ok spares.qd '.substitutions[0].method == "qD" and (.substitutions[0].moves | length) == 15 and .max_neighbour_hops == 2 and (.map | length) == 25' \
  spares --shape 6x6 --fail 2,2 --method qd --map
ok spares.1d '1D along dimension 1, 2 rank\(s\) moved' spares --shape 6x6 --fail 2,3 --method 1d
ok spares.0d 'rank 24: 4,4 -> 4,5' spares --shape 6x6 --fail 4,4 --method 0d
ok spares.collisions 'collisions \(0d\): 7' spares --shape 8x8 --fail 1,1 --fail 2,2 --fail 3,3 --method 0d
bad spares.not-cube 'not a 3-D cube' spares --nodes 1001 --dims 3
bad spares.used-up 'no qD substitute left' spares --shape 6x6 --fail 2,2 --fail 1,1 --fail 0,0 --method qd
bad spares.outside 'outside the mesh' spares --shape 6x6 --fail 9,9
bad spares.thick 'leaves no compute node' spares --shape 6x6 --thickness 6
bad no-subcommand '^cr_plan: .*subcommand'
bad unknown-option '^cr_plan: .*--bogus' interval --bogus 1

# --from and --stats with a real chain: a full and two incrementals of a
# sleeping process, made by the tools next to cr_plan.
BIN=$(dirname "$PLAN")
if [[ -x $BIN/cr_full && -x $BIN/cr_incr && -x $BIN/cr_info ]]; then
  # shellcheck source=../e2e/lib.sh
  source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"
  DIR=$(mktemp -d)
  # No fd of ours may reach the target: the tools refuse shared pipes.
  (
    close_fds
    exec sleep 60 >/dev/null 2>&1
  ) </dev/null &
  TARGET=$!
  trap 'kill $TARGET 2>/dev/null; rm -rf "$DIR" /tmp/cr_plan_cli.err.$$' EXIT
  sleep 0.2
  if "$BIN"/cr_full --dir "$DIR/chain" --json "$TARGET" >"$DIR/stats" &&
    sleep 0.3 && "$BIN"/cr_incr --dir "$DIR/chain" --json "$TARGET" >>"$DIR/stats" &&
    sleep 0.3 && "$BIN"/cr_incr --dir "$DIR/chain" --json "$TARGET" >>"$DIR/stats"; then
    info=$("$BIN"/cr_info --dir "$DIR/chain" --json)
    # The dirty rate cr_info's figures give: incremental pages / time since the full.
    rate=$(jq '(.generations | map(select(.kind == "incremental") | .pages) | add) * 4096 /
      ((.generations[-1].created_unix_ns - .generations[0].created_unix_ns) / 1e9)' <<<"$info")
    full=$(jq '.generations[0].content_bytes' <<<"$info")
    jq_ok from.migrate ".inputs.dirty_bytes_per_s.source == \"chain\" and
      ((.inputs.dirty_bytes_per_s.value - $rate) | fabs) <= 1e-6 * ($rate + 1) and
      .chain.full_content_bytes == $full and .chain.incrementals == 2 and
      .inputs.resident_bytes.source == \"chain\" and .inputs.resident_bytes.value > 0" \
      migrate --from "$DIR/chain" --lead 5 --bandwidth 1G --R 0.1
    of=$(jq -s 'map(select(.kind == "full") | .total_seconds) | add' "$DIR/stats")
    jq_ok from.stats ".inputs.Of.source == \"stats\" and .inputs.Of.value == $of and
      .inputs.Oi.source == \"stats\" and .inputs.interval.source == \"chain\" and
      .inputs.Rf.source == \"flag\"" \
      incrementals --from "$DIR/chain" --stats "$DIR/stats" --Rf 1 --Rfi 1.5 --mtbf 1d
    bad from.no-C 'need --C \(checkpoint time\): the chain records no checkpoint time; a cr_full --json line in --stats' \
      interval --from "$DIR/chain" --R 1 --mtbf 1d
    jq_ok from.stats-C ".inputs.C.source == \"stats\" and .inputs.C.value == $of" \
      interval --from "$DIR/chain" --stats "$DIR/stats" --R 1 --mtbf 1d
    # No restart measured: R estimated from the chain, and labelled so.
    jq_ok from.estimate '.inputs.R.source == "estimate" and .inputs.R.value > 0 and
      .inputs.R.restore_bytes > 0 and .inputs.R.read_bytes_per_s > 0 and .estimated == ["R"] and
      .exact.period_s > 0' interval --from "$DIR/chain" --stats "$DIR/stats" --mtbf 4500
    ok from.estimate-text '^R = .* s is an ESTIMATE \(no restart measured\)' \
      interval --from "$DIR/chain" --stats "$DIR/stats" --mtbf 4500
    jq_ok from.measured-R '.inputs.R.source == "flag" and (has("estimated") | not)' \
      interval --from "$DIR/chain" --stats "$DIR/stats" --R 2 --mtbf 4500
    # A directory of chains (cr_run's layout): its newest chain.
    mkdir -m 0700 "$DIR/run" && cp -a "$DIR/chain" "$DIR/run/chain-000001"
    jq_ok from.run-dir '.chain.generations == 3' migrate --from "$DIR/run" --lead 5 --bandwidth 1G --R 0.1
    echo '{"kind":' >"$DIR/garbage"
    bad from.bad-stats 'line 1: not a JSON object' interval --stats "$DIR/garbage" --R 1 --mtbf 1d
  else
    fail "from: could not make a chain of a sleeping process"
  fi
else
  echo "note: cr_full/cr_incr/cr_info not built next to cr_plan: --from not checked"
fi

# --stats with a job's lines: cr_restart --json of a 5-process job reads each
# generation once per process (generations_read 5 = a full, 10 = full + 1).
JOBSTATS=$(mktemp)
printf '%s\n' '{"kind":"full","total_seconds":2,"processes":5}' \
  '{"restore_seconds":3,"generations_read":5,"processes":5}' \
  '{"restore_seconds":4,"generations_read":10,"processes":5}' >"$JOBSTATS"
jq_ok stats.job-R '.inputs.R.value == 3 and .inputs.R.source == "stats"' interval --stats "$JOBSTATS" --mtbf 1d
jq_ok stats.job-Rfi '.inputs.Rf.value == 3 and .inputs.Rfi.value == 4' \
  incrementals --stats "$JOBSTATS" --Oi 1 --mtbf 1d
rm -f "$JOBSTATS"

# levels: policy.md's worked example (C = R = 2, 8, 60 s, MTBF 6 h, the
# production mix), the waste recomputed here from the plan's own schedule
# with the formula written out by hand.
jq_ok levels.example '.levels.local_per_partner == 1 and .levels.partner_per_shared == 9 and
  (.levels.period_s[0] | . > 605.3 and . < 605.5) and (.levels.waste | . > 0.04603 and . < 0.04604) and
  (.single.waste | . > 0.07731 and . < 0.07732) and
  ([.levels.period_s[0], .levels.local_per_partner, .levels.partner_per_shared] as [$t, $a, $b] |
    (((($a * $b - $b) * 2 + ($b - 1) * 8 + 60) / ($a * $b)) / $t +
     (0.138 + 0.784 * $a + 0.078 * $a * $b) / 43200 * $t +
     (0.138 * 2 + 0.784 * 8 + 0.078 * 60) / 21600) - .levels.waste | fabs < 1e-9)' \
  levels --C 2,8,1min --mtbf 6h
ok levels.text '^three levels: a checkpoint every 605.4 s' levels --C 2,8,60 --mtbf 6h
# Only process crashes: the local level alone, never the shared one (the
# largest ratio searched).
jq_ok levels.local-only '.levels.local_per_partner == 1000' \
  levels --C 1,10,100 --mtbf 1d --mix 1,0,0
bad levels.two-C 'C0,C1,C2' levels --C 2,8 --mtbf 6h
bad levels.mix 'add up to 1' levels --C 2,8,60 --mtbf 6h --mix 0.5,0.5,0.5
bad levels.zero-C 'must be a positive number' levels --C 0,8,60 --mtbf 6h

if ((failures)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all cr_plan checks passed"
