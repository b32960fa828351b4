#!/usr/bin/env bash
# package.sh BUILD SRC MODE: the installed package, as a user outside this
# tree gets it. `cmake --install` into a temporary prefix, then:
#   contents    headers, both libraries (SONAME, exported symbols), tools,
#               man pages, docs, libckpt.pc, libckptConfig.cmake + version
#   pkg-config  the installed examples/launcher.c built with pkg-config (shared)
#   cmake       the same built with find_package(libckpt), once against
#               libckpt::ckpt (shared) and once against libckpt::ckpt_static
#   man         every page renders with `man -l` without a warning (alias
#               pages through their `.so`), every installed cr_* tool has a
#               page, and every function ckpt.h and plan.h declare has one in
#               man3 (its own or an alias) that names it
# pkg-config and cmake then run the launcher over a real job (cr_work: three
# processes): two checkpoints on SIGUSR1 (a full, an incremental), the job's
# root SIGKILLed, restored by the launcher, and its result compared with an
# uninterrupted run's.
set -euo pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
MODE=$3
source "$SRC/tests/e2e/lib.sh"
WORK=$(mktemp -d /tmp/ckpt-package.XXXXXX)
install_traps
# A failed run can leave the job's workers waiting for their gate: end every
# process started from WORK before the common cleanup removes it.
kill_work_procs() {
  local p cmd
  for p in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
    [[ $cmd == *"$WORK/"* ]] && kill -9 "${p#/proc/}" 2>/dev/null
  done
  return 0
}
trap 'kill_work_procs; cleanup_common' EXIT
PREFIX=$WORK/prefix
LOGS+=("$WORK/install.log" "$WORK/build.log" "$WORK/launcher.err")

die() {
  echo "package.$MODE: $*" >&2
  show_logs
  exit 1
}

cmake --install "$BUILD" --prefix "$PREFIX" >"$WORK/install.log" 2>&1 || die "cmake --install failed"
LIBDIR=$(dirname "$(find "$PREFIX" -name libckpt.pc | head -1)")
LIBDIR=${LIBDIR%/pkgconfig}
[[ -f $LIBDIR/libckpt.a ]] || die "no libckpt.a in $LIBDIR"
EXAMPLE=$PREFIX/share/doc/libckpt/examples/launcher.c
[[ -f $EXAMPLE ]] || die "the example launcher.c was not installed"

# linked_to_installed EXE: EXE loads the installed libckpt.so.2.
linked_to_installed() {
  local so
  so=$(ldd "$1" | awk '$1 == "libckpt.so.2" { print $3 }')
  [[ -n $so && $(realpath "$so") == $(realpath "$LIBDIR/libckpt.so.2") ]]
}

# wait_children PID N: until PID has N children (the job has started its workers).
wait_children() {
  local deadline=$((SECONDS + 30))
  until [[ $(cat /proc/"$1"/task/*/children 2>/dev/null | wc -w) -ge $2 ]]; do
    ((SECONDS < deadline)) || die "$1 has no $2 children within 30 s"
    sleep 0.02
  done
}

# run_launcher EXE: checkpoint twice, kill the root, exact result after restore.
run_launcher() {
  local exe=$1 dir=$WORK/ck-${1##*/} err=$WORK/launcher.err
  rm -rf "$dir"
  : >"$err"
  cp "$BUILD/bin/e2e/cr_work" "$WORK/cr_work"
  # The job waits for the gate file after its work: the test opens it once
  # the job was restored, so nothing races the job's end.
  local gate=$WORK/gate
  touch "$gate"
  (close_fds; exec "$WORK/cr_work" 100 2 16 "$gate") >"$WORK/expected" </dev/null || die "uninterrupted run failed"
  rm "$gate"
  (close_fds; exec "$exe" "$dir" -- "$WORK/cr_work" 100 2 16 "$gate") >"$WORK/out" 2>"$err" </dev/null &
  local pid=$! root
  OWN_PIDS+=("$pid")
  wait_for() {  # wait_for PATTERN
    local deadline=$((SECONDS + 30))
    until grep -q -- "$1" "$err"; do
      [[ $(proc_state "$pid") != - && $(proc_state "$pid") != Z ]] || die "launcher ended before '$1'"
      ((SECONDS < deadline)) || die "no '$1' within 30 s"
      sleep 0.05
    done
  }
  wait_for "launcher: started"
  root=$(sed -n 's/launcher: started \([0-9]*\).*/\1/p' "$err")
  OWN_PIDS+=("$root")
  wait_children "$root" 2
  kill -USR1 "$pid"
  wait_for "generation 1 (full) of 3 processes"
  kill -USR1 "$pid"
  wait_for "generation 2 (incremental) of 3 processes"
  kill -9 "$root"
  wait_for "launcher: restored generation 2 as $root (3 processes"
  touch "$gate"
  wait_exit "$pid" 60 || die "the launcher did not end"
  [[ $EXIT_STATUS == 0 ]] || die "$exe exited $EXIT_STATUS"
  cmp -s "$WORK/expected" "$WORK/out" || die "result differs: $(cat "$WORK/out") vs $(cat "$WORK/expected")"
  echo "package.$MODE: ${exe##*/}: checkpointed, killed, restored, exact result $(cat "$WORK/out")"
}

case $MODE in
contents)
  for h in ckpt.h plan.h ckpt.hpp result.hpp migrate.hpp pause.hpp plan.hpp check.hpp tracker.hpp; do
    [[ -f $PREFIX/include/ckpt/$h ]] || die "header $h not installed"
  done
  so=$(readelf -d "$LIBDIR/libckpt.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [[ $so == libckpt.so.2 ]] || die "SONAME is '$so'"
  [[ -L $LIBDIR/libckpt.so && -f $LIBDIR/$so ]] || die "libckpt.so -> $so links missing"
  syms=$(nm -D --defined-only -C "$LIBDIR/libckpt.so")
  for s in ckpt_ctx_new ckpt_checkpoint_full ckpt_restore ckpt_verify ckpt_plan_interval \
    ckpt_tracker_name ckpt_version_number; do
    grep -qF -- "$s" <<<"$syms" || die "$s is not exported"
  done
  # The C API only: the C++ API is not part of the shared library's ABI.
  if grep -E "ckpt::" <<<"$syms"; then die "C++ symbols are exported (above)"; fi
  # The version the header states is the library's and the package's.
  hv=$(awk '/#define CKPT_VERSION_(MAJOR|MINOR|PATCH)/ { printf "%s%s", sep, $3; sep = "." }' \
    "$PREFIX/include/ckpt/ckpt.h")
  pv=$(sed -n 's/^project(libckpt VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
  [[ $hv == "$pv" ]] || die "ckpt.h says version $hv, the project $pv"
  [[ $so == "libckpt.so.${pv%%.*}" ]] || die "SONAME $so is not the major version of $pv"
  # Exactly the C functions the two C headers declare.
  want=$(grep -ohE '\bckpt_[a-z_]+\(' "$PREFIX/include/ckpt/ckpt.h" "$PREFIX/include/ckpt/plan.h" |
    tr -d '(' | sort -u)
  have=$(nm -D --defined-only "$LIBDIR/libckpt.so" | awk '$2 == "T" && $3 ~ /^ckpt_/ { sub(/@.*/, "", $3); print $3 }' | sort -u)
  [[ $want == "$have" ]] || die "exported C symbols differ from the headers: $(diff <(echo "$want") <(echo "$have") | grep '^[<>]' | tr '\n' ' ')"
  for t in cr_full cr_incr cr_restart cr_info cr_check cr_compact cr_migrate cr_recv cr_pause cr_plan cr_run cr_untrack; do
    [[ -x $PREFIX/bin/$t ]] || die "tool $t not installed"
  done
  [[ -f $PREFIX/share/doc/libckpt/guide.md && -f $PREFIX/share/doc/libckpt/format.md ]] ||
    die "docs not installed"
  [[ -f $LIBDIR/cmake/libckpt/libckptConfig.cmake && -f $LIBDIR/cmake/libckpt/libckptConfigVersion.cmake ]] ||
    die "CMake package files not installed"
  # The installed tools run from the prefix.
  "$PREFIX/bin/cr_check" >/dev/null || die "installed cr_check failed"
  echo "package.contents: ok ($(grep -c . <<<"$syms") exported symbols)"
  ;;
pkg-config)
  export PKG_CONFIG_PATH=$LIBDIR/pkgconfig
  [[ $(pkg-config --modversion libckpt) == "$(sed -n 's/^project(libckpt VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")" ]] ||
    die "pkg-config --modversion libckpt is wrong"
  # shellcheck disable=SC2046 # word splitting of pkg-config's flags is intended
  cc -std=c11 -Wall -Wextra -Werror -pedantic -o "$WORK/launcher-pkgconfig" "$EXAMPLE" \
    $(pkg-config --cflags --libs libckpt) -Wl,-rpath,"$(pkg-config --variable=libdir libckpt)" \
    >"$WORK/build.log" 2>&1 || die "building the launcher with pkg-config failed"
  linked_to_installed "$WORK/launcher-pkgconfig" || die "not linked to the installed libckpt.so.2"
  run_launcher "$WORK/launcher-pkgconfig"
  ;;
cmake)
  mkdir -p "$WORK/proj"
  cat >"$WORK/proj/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.20)
project(launcher LANGUAGES C)
find_package(libckpt 2.0 REQUIRED)
add_executable(launcher-cmake-shared "$EXAMPLE")
target_link_libraries(launcher-cmake-shared PRIVATE libckpt::ckpt)
add_executable(launcher-cmake-static "$EXAMPLE")
target_link_libraries(launcher-cmake-static PRIVATE libckpt::ckpt_static)
set_target_properties(launcher-cmake-shared launcher-cmake-static PROPERTIES C_STANDARD 11)
target_compile_options(launcher-cmake-shared PRIVATE -Wall -Wextra -Werror)
CMAKE
  { cmake -S "$WORK/proj" -B "$WORK/proj/build" -DCMAKE_PREFIX_PATH="$PREFIX" &&
    cmake --build "$WORK/proj/build"; } >"$WORK/build.log" 2>&1 ||
    die "building the launcher with find_package(libckpt) failed"
  linked_to_installed "$WORK/proj/build/launcher-cmake-shared" ||
    die "the shared launcher is not linked to the installed libckpt.so.2"
  ! ldd "$WORK/proj/build/launcher-cmake-static" | grep -q libckpt ||
    die "the static launcher needs libckpt.so"
  run_launcher "$WORK/proj/build/launcher-cmake-shared"
  run_launcher "$WORK/proj/build/launcher-cmake-static"
  ;;
man)
  MANDIR=$PREFIX/share/man
  pages=0
  for t in "$PREFIX"/bin/cr_*; do
    [[ -f $MANDIR/man1/${t##*/}.1 ]] || die "no man page for ${t##*/}"
  done
  [[ -f $MANDIR/man3/libckpt.3 ]] || die "no libckpt(3)"
  # man resolves an alias page's `.so man3/X.3` from the current directory,
  # as it does under a man directory: render from MANDIR.
  render() {  # render PAGE [man options]: PAGE relative to MANDIR
    local page=$1
    shift
    (cd "$MANDIR" && MANWIDTH=80 LC_ALL=C.UTF-8 man "$@" -E UTF-8 -l "$page")
  }
  for page in "$MANDIR"/man1/*.1 "$MANDIR"/man3/*.3; do
    rel=${page#"$MANDIR"/}
    out=$(render "$rel" --warnings 2>&1 >/dev/null) || die "man -l $rel failed: $out"
    [[ -z $out ]] || die "$rel: $out"
    text=$(render "$rel" 2>/dev/null)
    grep -q "^NAME" <<<"$text" && grep -q "^SYNOPSIS" <<<"$text" || die "$rel: no NAME/SYNOPSIS"
    pages=$((pages + 1))
  done
  # Every C function of the installed headers has a page in man3, its own
  # or an alias (`.so man3/FAMILY.3`) whose target is installed, and the
  # page's NAME names it (what `man FUNCTION` shows).
  funcs=$(grep -ohE '\bckpt_[a-z_]+\(' "$PREFIX/include/ckpt/ckpt.h" "$PREFIX/include/ckpt/plan.h" |
    tr -d '(' | sort -u)
  [[ -n $funcs ]] || die "no functions found in ckpt.h and plan.h"
  nfuncs=0
  for f in $funcs; do
    [[ -f $MANDIR/man3/$f.3 ]] || die "no man page for $f (man3/$f.3), declared in ckpt.h or plan.h"
    target=$(sed -n 's/^\.so  *//p' "$MANDIR/man3/$f.3")
    [[ -z $target || -f $MANDIR/$target ]] || die "man3/$f.3 is an alias of $target, which is not installed"
    awk '/^\.SH NAME/ { getline; print; exit }' "$MANDIR/${target:-man3/$f.3}" | grep -qw -- "$f" ||
      die "man3/$f.3: the NAME line of ${target:-man3/$f.3} does not name $f"
    nfuncs=$((nfuncs + 1))
  done
  echo "package.man: $pages pages render without warnings; the $nfuncs C functions each have one"
  ;;
*) die "unknown mode" ;;
esac
