#!/usr/bin/env bash
# check_layers.sh: the library's folders (libckpt/src/*) form layers, and a
# file may include only headers of its own folder or of a lower layer
# (docs/architecture.md, "Layers"). Prints every include that points up or
# sideways and exits 1 if there is any; a folder missing from LAYERS is an
# error too, so a new folder must be placed before it is used.
set -euo pipefail
cd "$(dirname "$0")/../libckpt/src"

# Lowest first. Folders on one line are one layer: they may not include each
# other.
LAYERS=(
  "util"
  "image"
  "proc mem"
  "dirty sockets ipc tty notify"
  "dump"
  "restore"
  "job system"
  "migrate pause policy"
  "nodes"
  "capi"
)

declare -A rank
for i in "${!LAYERS[@]}"; do
  for f in ${LAYERS[i]}; do rank[$f]=$i; done
done

bad=0
for dir in */; do
  dir=${dir%/}
  [[ -n ${rank[$dir]+x} ]] || {
    echo "libckpt/src/$dir: a folder with no layer (add it to LAYERS in scripts/check_layers.sh)"
    bad=1
    continue
  }
done
while IFS=: read -r file line text; do
  from=${file%%/*}
  to=$(sed -E 's/^#include "([a-z_]+)\/.*/\1/' <<<"$text")
  [[ $from == "$to" || -z ${rank[$from]+x} ]] && continue
  if [[ -z ${rank[$to]+x} ]]; then
    echo "libckpt/src/$file:$line: includes $to/, which is no folder of the library"
    bad=1
  elif ((rank[$to] >= rank[$from])); then
    echo "libckpt/src/$file:$line: $from/ (layer $((rank[$from]))) includes $to/ (layer $((rank[$to]))): ${text#\#include }"
    bad=1
  fi
done < <(grep -rnE '^#include "[a-z_]+/' --include='*.cpp' --include='*.hpp' .| sed 's|^\./||')
if ((bad)); then
  echo "check_layers: includes that do not point down (docs/architecture.md, Layers)"
  exit 1
fi
echo "check_layers: ${#LAYERS[@]} layers, every include points down"
