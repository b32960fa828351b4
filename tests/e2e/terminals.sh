#!/usr/bin/env bash
# terminals.sh BIN_DIR tmux|screen: a terminal multiplexer (Debian's tmux or
# GNU screen) with two windows, each a shell loop printing ticks on its pty,
# checkpointed by its server's PID (cr_full --tree --kill) and restored:
#   - before and after, each loop's shell has its pty as controlling
#     terminal and is its foreground group (ps TT and TPGID);
#   - after the restore the loops go on (their output moves on);
#   - Ctrl-C typed into the first window (send-keys, stuff) ends its loop;
#   - ending the server (kill-server, quit) ends the second loop too (the
#     hangup reaches it through its controlling terminal), and cr_restart,
#     which waits for the server, returns.
# Exit 77 (skip) where the multiplexer is not installed.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
BIN_DIR=$(cd "$1" && pwd)
MUX=$2
E2E_CASE="terminals $MUX"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-e2e-term.XXXXXX")
install_traps
LOGS=("$WORK/full.err" "$WORK/restart.err")
LOOPS=()
# Ours only while they run what we started (a PID may be reused once gone).
kill_if() { # PID COMM...
  local p=$1 c
  shift
  c=$(cat /proc/"$p"/comm 2>/dev/null) || return 0
  for n in "$@"; do [[ $c == "$n"* ]] && kill -9 "$p" 2>/dev/null; done
  return 0
}
cleanup() {
  local p
  [[ -n ${RESTART:-} ]] && kill_if "$RESTART" cr_restart
  [[ -n ${SERVER:-} ]] && kill_if "$SERVER" tmux screen SCREEN
  for p in "${LOOPS[@]}"; do kill_if "$p" sh; done
  cleanup_common
}
trap cleanup EXIT
command -v "$MUX" >/dev/null || skip "$MUX is not installed (scripts/setup.sh installs it)"
export TERM=xterm SHELL=/bin/sh

# The loop as a script (screen expands $ in the commands it is sent).
LOOP=$WORK/loop.sh
echo 'i=0; while :; do i=$((i+1)); echo "tick$i"; sleep 0.2; done' >"$LOOP"
case $MUX in
  tmux)
    SOCK=$WORK/tmux.sock
    mux() { tmux -S "$SOCK" "$@"; }
    start() {
      mux -f /dev/null new-session -d -x 80 -y 24 -n one "sh $LOOP" &&
        mux new-window -d -n two "sh $LOOP"
    }
    server_pid() { mux display-message -p '#{pid}'; }
    screen_of() { mux capture-pane -p -t "$1"; }
    interrupt() { mux send-keys -t one C-c; }
    quit() { mux kill-server; }
    ;;
  screen)
    export SCREENDIR=$WORK/screens
    mkdir -m 700 "$SCREENDIR"
    NAME=ckpt$$
    mux() { screen -S "$NAME" "$@"; }
    start() {
      screen -dmS "$NAME" sh "$LOOP" && sleep 0.3 && mux -X screen sh "$LOOP"
    }
    server_pid() { screen -ls | awk -v n=".$NAME" 'index($1, n) { split($1, a, "."); print a[1] }'; }
    screen_of() {
      local w=0
      [[ $1 == one ]] || w=1
      rm -f "$WORK/hardcopy"
      mux -p "$w" -X hardcopy "$WORK/hardcopy" && sleep 0.2 && cat "$WORK/hardcopy"
    }
    interrupt() { mux -p 0 -X stuff $'\003'; }
    quit() { mux -X quit; }
    ;;
  *) fail "unknown multiplexer $MUX" ;;
esac

# The newest tick a window shows.
last_tick() { screen_of "$1" 2>/dev/null | grep -o 'tick[0-9]*' | tail -n 1 | tr -d tick; }
wait_ticks() { # WINDOW ABOVE: until the window shows a tick above ABOVE (10 s)
  local n deadline=$((SECONDS + 10))
  while :; do
    n=$(last_tick "$1")
    [[ -n $n ]] && ((n > $2)) && return 0
    ((SECONDS < deadline)) || fail "window $1 shows no tick above $2 (last: ${n:-none})"
    sleep 0.2
  done
}
# The loops' shells: the server's children running sh.
loops() {
  local c
  for c in $(cat /proc/"$SERVER"/task/*/children 2>/dev/null); do
    [[ $(cat /proc/"$c"/comm 2>/dev/null) == sh ]] && echo "$c"
  done
}
# Each shell has a pty as controlling terminal and leads its foreground group.
check_terminals() {
  local p tt tpgid
  for p in "${LOOPS[@]}"; do
    read -r tt tpgid < <(ps -o tty=,tpgid= -p "$p")
    [[ $tt == pts/* ]] || fail "$1: shell $p has no controlling terminal (TT '$tt')"
    ((tpgid == p)) || fail "$1: shell $p is not its terminal's foreground group (TPGID $tpgid)"
  done
}
gone() { [[ $(proc_state "$1") == [Z-] ]]; }
wait_gone() { # PID SECONDS
  local deadline=$((SECONDS + $2))
  until gone "$1"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

(close_fds && start) || fail "$MUX did not start"
SERVER=$(server_pid)
[[ -n $SERVER ]] || fail "no $MUX server"
wait_ticks one 2
wait_ticks two 2
mapfile -t LOOPS < <(loops)
((${#LOOPS[@]} == 2)) || fail "expected 2 loops under the server, found ${#LOOPS[@]}"
check_terminals "before the checkpoint"
before=$(last_tick one)

"$BIN_DIR/cr_full" --dir "$WORK/ck" --tree --kill "$SERVER" </dev/null >/dev/null 2>"$WORK/full.err" ||
  fail "cr_full --tree --kill: $(first_line "$WORK/full.err")"
wait_gone "$SERVER" 10 || fail "the server still runs after cr_full --kill"
for p in "${LOOPS[@]}"; do wait_gone "$p" 10 || fail "loop $p still runs after cr_full --kill"; done

(close_fds && exec "$BIN_DIR/cr_restart" --dir "$WORK/ck" </dev/null >/dev/null 2>"$WORK/restart.err") &
RESTART=$!
deadline=$((SECONDS + 10))
until [[ $(proc_state "$SERVER") == [RS] ]] && [[ $(tracer_of "$SERVER") == 0 ]]; do
  [[ $(proc_state "$RESTART") != [Z-] ]] || fail "cr_restart ended: $(first_line "$WORK/restart.err")"
  ((SECONDS < deadline)) || fail "the server was not restored within 10 s"
  sleep 0.1
done
check_terminals "after the restore"
wait_ticks one 0
n=$(last_tick one)
wait_ticks one "$n"
after=$(last_tick one)

interrupt
wait_gone "${LOOPS[0]}" 5 || fail "Ctrl-C did not end the first loop (shell ${LOOPS[0]})"
gone "${LOOPS[1]}" && fail "Ctrl-C in the first window ended the second loop too"
quit
wait_gone "${LOOPS[1]}" 5 || fail "ending the server left the second loop running (shell ${LOOPS[1]})"
wait_gone "$SERVER" 5 || fail "the server still runs after it was told to end"
wait_exit "$RESTART" 10 || fail "cr_restart did not return once the server ended"
pass "2 loops, window one at tick $before before, $after after; Ctrl-C and the end of the server reached them"
