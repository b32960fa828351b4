#!/bin/bash
# Every benchmark answers --help with its usage (exit 0) instead of running,
# and refuses an option it does not know (non-zero exit).
set -u
bin=$1
fail=0
for b in bench_full bench_incr bench_freeze bench_job bench_migrate bench_adaptive bench_uring \
  bench_compress; do
  out=$(timeout 20 "$bin/$b" --help 2>&1)
  rc=$?
  if [ $rc -ne 0 ] || ! grep -q -- "--" <<<"$out" || ! grep -qi "$b\|usage" <<<"$out"; then
    echo "FAIL: $b --help exited $rc or printed no usage: ${out:0:200}"
    fail=1
  fi
  if timeout 20 "$bin/$b" --no-such-option >/dev/null 2>&1; then
    echo "FAIL: $b accepted --no-such-option"
    fail=1
  fi
done
[ $fail -eq 0 ] && echo "every benchmark answers --help and refuses unknown options"
exit $fail
