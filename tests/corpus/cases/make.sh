#!/usr/bin/env bash
# make -j2 of a generated C project (24 files of 150 functions, cc -O2, gcc's
# temporary files on disk, as in Debian's /tmp), checkpointed as a tree while
# it compiles (make, the compiler drivers, cc1, as), killed, restored: the
# build must finish and its program print the value the generator computed.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
corpus_begin make "$@"

mkdir "$WORK/proj"
python3 - "$WORK/proj" <<'PY'
import sys

root = sys.argv[1]
M = 0xFFFFFFFF
x = 12345
for k in range(24):
    with open(f"{root}/part{k}.c", "w") as f:
        for j in range(150):
            a, b = (k * 150 + j) * 2654435761 & M, (j * 40503 + k) & 31 or 1
            f.write(f"static unsigned f{j}(unsigned x) {{ x ^= x << {b % 13 + 1}; x += {a}u; "
                    f"x ^= x >> {b % 7 + 3}; return x * {a | 1}u; }}\n")
        f.write(f"unsigned part{k}(unsigned x) {{\n")
        for j in range(150):
            f.write(f"  x = f{j}(x);\n")
        f.write("  return x;\n}\n")
    for j in range(150):
        a, b = (k * 150 + j) * 2654435761 & M, (j * 40503 + k) & 31 or 1
        x ^= (x << (b % 13 + 1)) & M
        x = (x + a) & M
        x ^= x >> (b % 7 + 3)
        x = (x * (a | 1)) & M
with open(f"{root}/main.c", "w") as f:
    f.write("#include <stdio.h>\n")
    for k in range(24):
        f.write(f"unsigned part{k}(unsigned);\n")
    f.write("int main(void) {\n  unsigned x = 12345;\n")
    for k in range(24):
        f.write(f"  x = part{k}(x);\n")
    f.write('  printf("%u\\n", x);\n  return 0;\n}\n')
with open(f"{root}/Makefile", "w") as f:
    # The link waits for a gate the test opens after the restore: the build
    # cannot finish before it is killed, however fast the machine.
    f.write("CFLAGS = -O2\nOBJS = $(patsubst %.c,%.o,$(wildcard *.c))\n"
            "prog: gate\n\t$(CC) -o $@ $(OBJS)\n"
            ".PHONY: gate\ngate: $(OBJS)\n\twhile [ ! -e gate.open ]; do sleep 0.1; done\n")
with open(f"{root}/expected", "w") as f:
    f.write(f"{x}\n")
PY
# gcc's temporary files in a directory of their own on the same disk as
# /tmp: those a killed build leaves could not be told from other builds'.
mkdir "$WORK/tmp"
TREE=1
TMPDIR=$WORK/tmp start_bg make make -C proj -j2
wait_until 60 "first object" 'compgen -G "$WORK/proj/*.o" >/dev/null'
checkpoint full
sleep 0.5
checkpoint incr
# The build goes on a while after its last checkpoint, as it would until a
# failure: compile steps that were running finish meanwhile.
sleep 2
[[ ! -e $WORK/proj/prog ]] || fail "the build finished before it was killed"
kill_tree
touch "$WORK/proj/gate.open"
restore_wait
[[ -x $WORK/proj/prog ]] || fail "the restored build made no program"
run_fg prog proj/prog
cmp -s "$WORK/prog.out" "$WORK/proj/expected" || fail "the program printed $(<"$WORK/prog.out"), expected $(<"$WORK/proj/expected")"
corpus_pass "$(make --version | head -n 1), $(cc --version | head -n 1)"
