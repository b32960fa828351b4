#!/usr/bin/env bash
# check_library.sh: the library is mechanism (docs/architecture.md,
# "Layers"): it reads no configuration from the environment (only TMPDIR and
# XDG_RUNTIME_DIR, where temporary and per-user files go) and prints
# nothing (what a call has to say goes to its LogFn or its statistics).
# Prints every offending line and exits 1 if there is any.
set -euo pipefail
cd "$(dirname "$0")/../libckpt/src"
bad=0
while IFS= read -r hit; do
  [[ $hit =~ getenv\(\"(TMPDIR|XDG_RUNTIME_DIR)\"\) ]] && continue
  echo "libckpt/src/$hit: the environment read inside the library (pass an option instead)"
  bad=1
done < <(grep -rnE '\bgetenv\s*\(' --include='*.cpp' --include='*.hpp' . | sed 's|^\./||' |
  grep -vE '^[^:]+:[0-9]+:\s*//' || true)
while IFS= read -r hit; do
  echo "libckpt/src/$hit: the library prints (tell the caller's LogFn instead)"
  bad=1
done < <(grep -rnE '\b(stderr|stdout|std::cerr|std::cout|perror)\b|[^nf]printf\s*\(|\bputs\s*\(' \
  --include='*.cpp' --include='*.hpp' . | sed 's|^\./||' | grep -vE '^[^:]+:[0-9]+:\s*//' || true)
if ((bad)); then
  echo "check_library: the library reads the environment or prints"
  exit 1
fi
echo "check_library: no environment knobs, no printing"
