#!/usr/bin/env bash
# check_docs.sh: docs and comments are for users and maintainers of the
# product, not a lab notebook. Fails on, in docs (README.md, docs/, man/,
# tests' and benches' READMEs): numbered or other work sessions, helper
# sessions, turns; in docs and code: absolute paths of one machine's home or
# work directories; in code comments: dates (a measurement or a CI run of
# one day belongs in a commit message). Test fixtures (tests/unit) may use
# any path. Prints each offending line and exits 1 if there is any.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=0
report() {  # report WHY: offending lines on stdin
  local why=$1 line
  while IFS= read -r line; do
    echo "$line: $why"
    bad=1
  done
}
DOCS=(README.md docs man tests/e2e/README.md tests/corpus/README.md)
[[ -d bench ]] && DOCS+=($(find bench -name '*.md'))
CODE=(libckpt tools tests bench scripts examples kmod cmake .ci CMakeLists.txt)

report "a work session or turn (say what the product does instead)" < <(
  grep -rnEi '\bsessions? [0-9]+\b|\bother sessions\b|\bhelper sessions?\b|\b(this|that|next|last) turn\b|\bturn [0-9]+\b' \
    "${DOCS[@]}" 2>/dev/null || true)
report "a path of one machine" < <(
  grep -rnE '(^|[^A-Za-z0-9_.~-])/(home|work|root)/' "${DOCS[@]}" "${CODE[@]}" 2>/dev/null |
    grep -v '^tests/unit/' || true)
# A date in a comment: after //, /*, or a leading # or *.
report "a date in a comment (it belongs in a commit message)" < <(
  grep -rnE '(//|/\*|^\s*#|^\s*\*).*\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b' \
    --include='*.cpp' --include='*.hpp' --include='*.c' --include='*.h' --include='*.sh' \
    --include='*.cmake' --include='CMakeLists.txt' --include='*.py' --include='run' "${CODE[@]}" \
    2>/dev/null | grep -vE '\b20[0-9]{2}-[01][0-9]-[0-3][0-9]T' || true)
if ((bad)); then
  echo "check_docs: notebook wording in docs or comments (above)"
  exit 1
fi
echo "check_docs: no sessions, dates or one machine's paths"
