#!/usr/bin/env bash
# creds.sh BIN_DIR TEST: credentials, scheduling and the privilege rules of a
# restore (docs/security.md). The workload is programs/identity.c.
#   status-fields  a root session leader started with inheritable and ambient
#                  capabilities, a reduced bounding set, locked securebits,
#                  no_new_privs, nice 3, SCHED_BATCH and one CPU, whose second
#                  thread gave itself other uids, gids, groups and nice; after
#                  checkpoint, kill and restore, every field of every thread's
#                  /proc/PID/task/TID/status is compared, or is in a list below
#                  with the reason it is not; scheduling (policy, priority,
#                  nice from stat) and securebits (reported by the threads
#                  themselves) are compared too.
#   user-restore   a process of an unprivileged user, checkpointed by that
#                  user (the images are theirs), restored by root: it runs
#                  with the user's uid and gid and no capabilities, and cannot
#                  read /etc/shadow.
#   root-checkpoint  the same process checkpointed by root (images root's):
#                  restored as the user all the same (credentials are saved,
#                  not taken from whoever restores).
#   groups         a process leading its own group in this script's session:
#                  restored, it leads its group again (NSpgid = its PID) and
#                  joins the session of the restorer, whose leader was outside
#                  the checkpoint; cr_info says so before the restore.
#   own-restore    a user restores their own process, checkpointed by
#                  them: a plain cr_restart refuses with one line naming
#                  CAP_CHECKPOINT_RESTORE (with and without --new-pid); a
#                  copy given that one file capability (setcap) restores it
#                  with its PID, uids, executable link and no capability,
#                  and still refuses the same images edited to claim uid 0.
#   refusals       a memory policy and PR_SET_THP_DISABLE: cr_full refuses
#                  each with one line naming it and the process runs on to
#                  its normal end.
#   escalation     the same user's images edited to claim uid 0 with every
#                  capability (checksums recomputed), or stripped of their
#                  credential records: root's cr_restart refuses both with one
#                  line and starts nothing; so do images edited to open
#                  /etc/shadow for the process (the user could not open it);
#                  the same edited images owned by root (who could have
#                  written anything) restore.
# Needs root (setpriv, useradd). Prints "PASS creds TEST" or "FAIL creds TEST: reason".
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
(($# == 2)) || {
  echo "usage: $0 BIN_DIR status-fields|groups|user-restore|root-checkpoint|own-restore|refusals|escalation" >&2
  exit 2
}
BIN_DIR=$(cd "$1" && pwd)
TEST=$2
PROG_DIR=${E2E_PROG_DIR:-$BIN_DIR/e2e}
TEST_USER=ckpt-e2e

E2E_CASE="creds $TEST" # for pass, fail and skip (lib.sh)
((EUID == 0)) || fail "needs root"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-creds-$TEST.XXXXXX")
chmod 755 "$WORK"
install_traps
LOGS=("$WORK/prog.err" "$WORK/tool.err")
for x in cr_full cr_restart; do [[ -x $BIN_DIR/$x ]] || fail "$BIN_DIR/$x not built"; done
for x in identity meta_edit; do [[ -x $PROG_DIR/$x ]] || fail "$PROG_DIR/$x not built"; done

# start WRAPPER... -- ARGS: starts identity under WRAPPER with its ready file
# in $RDIR and sets TPID.
start() {
  local wrap=()
  while [[ $1 != -- ]]; do
    wrap+=("$1")
    shift
  done
  shift
  # Its working directory is $WORK, open to the test user wherever the
  # checkout lies (a clone in a mktemp -d directory is closed to others,
  # and a restore as root then refuses to open it for the process).
  (close_fds && cd "$WORK" && exec "${wrap[@]}" "$PROG" "$RDIR/ready" "$@" </dev/null \
    >"$WORK/prog.out" 2>"$WORK/prog.err") &
  TPID=$!
  OWN_PIDS+=("$TPID")
  wait_file "$RDIR/ready" "$TPID" 30 || fail "identity did not become ready: $(first_line "$WORK/prog.err")"
}

# finish PID: lets the (restored, not our child) process end and checks its result.
finish() {
  touch "$RDIR/ready.go"
  local deadline=$((SECONDS + 30))
  while [[ -e /proc/$1 ]]; do
    ((SECONDS < deadline)) || fail "process $1 did not end after the go file"
    sleep 0.05
  done
  [[ -s $RDIR/ready.result ]] || fail "no result from the restored process: $(first_line "$WORK/prog.err")"
}

# restore DIR: cr_restart --detach as root; sets RPID.
restore() {
  timeout 60 "$BIN_DIR/cr_restart" --dir "$1" --detach </dev/null >"$WORK/restore.out" \
    2>"$WORK/tool.err" || fail "cr_restart: $(first_line "$WORK/tool.err")"
  RPID=$(tr -dc 0-9 <"$WORK/restore.out")
  [[ -n $RPID && -e /proc/$RPID ]] || fail "cr_restart printed no running PID"
}

# ensure_user: creates TEST_USER (no home, no login) if missing; sets TUID, TGID.
ensure_user() {
  if ! id -u "$TEST_USER" >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin "$TEST_USER" 2>"$WORK/tool.err" ||
      skip "cannot create user $TEST_USER: $(first_line "$WORK/tool.err")"
  fi
  TUID=$(id -u "$TEST_USER")
  TGID=$(id -g "$TEST_USER")
}

# user_checkpoint [root]: identity started by TEST_USER and checkpointed
# (--kill) by that user, images in $WORK/u/ck owned by the user; with "root",
# checkpointed by root (who may lack CAP_SYS_RESOURCE, as on the development
# host), images owned by root.
user_checkpoint() {
  ensure_user
  mkdir -p "$WORK/bin" "$WORK/u"
  cp "$PROG_DIR/identity" "$BIN_DIR/cr_full" "$WORK/bin/"
  chmod 755 "$WORK/bin" "$WORK/bin"/*
  chown "$TUID:$TGID" "$WORK/u"
  chmod 700 "$WORK/u"
  PROG=$WORK/bin/identity
  RDIR=$WORK/u
  AS_USER=(setpriv "--reuid=$TUID" "--regid=$TGID" --init-groups)
  # Its output files are the user's, as a batch system makes them: a root
  # restore of the user's images reopens only files the user could open.
  : >"$WORK/prog.out"
  : >"$WORK/prog.err"
  chown "$TUID:$TGID" "$WORK/prog.out" "$WORK/prog.err"
  start "${AS_USER[@]}" --
  local by=("${AS_USER[@]}") owner=$TUID
  if [[ ${1:-} == root ]]; then
    by=()
    owner=0
  fi
  timeout 60 "${by[@]}" "$WORK/bin/cr_full" --dir "$WORK/u/ck" --kill --tracker hash "$TPID" \
    >/dev/null 2>"$WORK/tool.err" || fail "cr_full as ${1:-$TEST_USER}: $(first_line "$WORK/tool.err")"
  wait_exit "$TPID" 10 || fail "the target did not end after cr_full --kill"
  [[ $(stat -c %u "$WORK/u/ck/gen-000001/meta.img") == "$owner" ]] ||
    fail "the images are not owned by uid $owner"
}

# Fields of /proc/PID/status that a restore does not reproduce, and why.
declare -A NOT_COMPARED=(
  [State]="running or sleeping: changes by itself"
  [SigQ]="signals queued to all processes of the uid (a user-wide count); its limit is RLIMIT_SIGPENDING, restored"
  [PPid]="the restored process is cr_restart's child (process trees are not restored)"
  [TracerPid]="0 before; the restorer's while rebuilding, 0 after"
  [FDSize]="the size of the fd table the kernel allocated, not an fd"
  [Ngid]="NUMA balancing group: the kernel's choice"
  [VmPeak]="high-water mark: counts the restorer's own mappings"
  [VmHWM]="high-water mark of resident memory"
  [VmRSS]="resident memory: pages come back as they are touched"
  [RssAnon]="resident memory"
  [RssFile]="resident memory"
  [RssShmem]="resident memory"
  [VmPTE]="page-table size follows residency"
  [VmSwap]="swap use"
  [voluntary_ctxt_switches]="a counter"
  [nonvoluntary_ctxt_switches]="a counter"
  [Mems_allowed]="cpuset of the cgroup the restorer runs in (cgroups are not saved)"
  [Mems_allowed_list]="as Mems_allowed"
)
# Everything else must be equal, including fields this list does not know
# yet: a new kernel's new field fails the test until someone decides.

# snapshot PID FILE: every thread's status (TID-prefixed lines) and its
# scheduling from stat (priority, nice, rt_priority, policy).
snapshot() {
  local tid
  : >"$2"
  for tid in $(ls "/proc/$1/task" | sort -n); do
    sed "s/^/$tid /" "/proc/$1/task/$tid/status" >>"$2"
    local stat
    stat=$(cat "/proc/$1/task/$tid/stat")
    stat=${stat##*) }
    # shellcheck disable=SC2086
    set -- "$1" "$2" $stat
    # after ") ": field 3 is $3; priority is field 18, nice 19, rt_priority 40, policy 41
    echo "$tid sched: prio=${18} nice=${19} rt_priority=${40} policy=${41}" >>"$2"
  done
}

case $TEST in
  status-fields)
    mkdir -m 1777 "$WORK/r"
    RDIR=$WORK/r
    PROG=$PROG_DIR/identity
    start setsid nice -n 3 taskset -c 0 chrt --batch 0 setpriv --inh-caps=+net_bind_service \
      --ambient-caps=+net_bind_service --bounding-set=-sys_module,-sys_rawio \
      --securebits=+no_setuid_fixup,+no_setuid_fixup_locked --no-new-privs -- split
    snapshot "$TPID" "$WORK/before"
    grep -q "^[0-9]* Uid:.*4321" "$WORK/before" || fail "the second thread did not change its uids"
    grep -q "^$TPID NSsid:[[:space:]]*$TPID$" "$WORK/before" || fail "the target does not lead a session"
    timeout 60 "$BIN_DIR/cr_full" --dir "$WORK/ck" --kill "$TPID" >/dev/null 2>"$WORK/tool.err" ||
      fail "cr_full: $(first_line "$WORK/tool.err")"
    wait_exit "$TPID" 10 || fail "the target did not end after cr_full --kill"
    restore "$WORK/ck"
    snapshot "$RPID" "$WORK/after"
    finish "$RPID"
    compared=0
    while IFS= read -r line; do
      tid=${line%% *}
      rest=${line#* }
      key=${rest%%:*}
      if [[ -n ${NOT_COMPARED[$key]:-} ]]; then continue; fi
      grep -qxF -- "$line" "$WORK/after" ||
        fail "thread $tid: \"$rest\" became \"$(grep -F -- "$tid $key:" "$WORK/after" | head -1 | cut -d' ' -f2-)\""
      compared=$((compared + 1))
    done <"$WORK/before"
    cmp -s <(sort "$WORK/r/ready.bits") <(sort "$WORK/r/ready.bits2") ||
      fail "securebits changed: $(sort "$WORK/r/ready.bits" | tr '\n' ' ')-> $(sort "$WORK/r/ready.bits2" | tr '\n' ' ')"
    echo "  $compared status and scheduling lines equal over $(grep -c ' Name:' "$WORK/before") threads; not compared: ${!NOT_COMPARED[*]}"
    ;;
  groups)
    mkdir -m 1777 "$WORK/r"
    RDIR=$WORK/r
    PROG=$PROG_DIR/identity
    start python3 -c 'import os, sys; os.setpgid(0, 0); os.execv(sys.argv[1], sys.argv[1:])' --
    read -r our_pgid our_sid < <(ps -o pgid=,sid= -p $$)
    read -r pgid sid < <(ps -o pgid=,sid= -p "$TPID")
    [[ $pgid == "$TPID" && $sid == "$our_sid" ]] ||
      fail "the target has group $pgid and session $sid, not $TPID and $our_sid"
    timeout 60 "$BIN_DIR/cr_full" --dir "$WORK/ck" --kill "$TPID" >/dev/null 2>"$WORK/tool.err" ||
      fail "cr_full: $(first_line "$WORK/tool.err")"
    wait_exit "$TPID" 10 || fail "the target did not end after cr_full --kill"
    "$BIN_DIR/cr_info" --dir "$WORK/ck" >"$WORK/info.out" 2>"$WORK/tool.err" ||
      fail "cr_info: $(first_line "$WORK/tool.err")"
    grep -q "session $our_sid (led outside the checkpoint: a restore joins the restorer's)" \
      "$WORK/info.out" || fail "cr_info does not say the session is the restorer's: $(cat "$WORK/info.out")"
    restore "$WORK/ck"
    read -r pgid sid < <(ps -o pgid=,sid= -p "$RPID")
    [[ $pgid == "$RPID" ]] || fail "restored in process group $pgid, not its own ($RPID)"
    [[ $sid == "$our_sid" ]] || fail "restored in session $sid, not the restorer's ($our_sid)"
    finish "$RPID"
    echo "  group $TPID led again, session $sid (the restorer's; saved $our_sid was led outside)"
    ;;
  user-restore | root-checkpoint)
    if [[ $TEST == root-checkpoint ]]; then user_checkpoint root; else user_checkpoint; fi
    restore "$WORK/u/ck"
    uid_line=$(awk '/^Uid:/ { print $2, $3, $4, $5 }' "/proc/$RPID/status")
    gid_line=$(awk '/^Gid:/ { print $2, $3, $4, $5 }' "/proc/$RPID/status")
    capeff=$(awk '/^CapEff:/ { print $2 }' "/proc/$RPID/status")
    capprm=$(awk '/^CapPrm:/ { print $2 }' "/proc/$RPID/status")
    [[ $uid_line == "$TUID $TUID $TUID $TUID" ]] || fail "restored with uids $uid_line, not $TUID"
    [[ $gid_line == "$TGID $TGID $TGID $TGID" ]] || fail "restored with gids $gid_line, not $TGID"
    [[ $capeff == 0000000000000000 && $capprm == 0000000000000000 ]] ||
      fail "restored with capabilities (permitted $capprm, effective $capeff)"
    finish "$RPID"
    [[ $(cat "$RDIR/ready.result") == "shadow denied" ]] ||
      fail "the restored process could read /etc/shadow"
    echo "  restored as uid $TUID: uids $uid_line, no capabilities, /etc/shadow denied"
    ;;
  own-restore)
    command -v setcap >/dev/null || fail "no setcap (Debian's libcap2-bin; scripts/setup.sh installs it)"
    user_checkpoint
    cp -a "$WORK/u/ck" "$WORK/u/ck-root"
    "$PROG_DIR/meta_edit" "$WORK/u/ck-root/gen-000001" claim-root || fail "meta_edit claim-root"
    cp "$BIN_DIR/cr_restart" "$WORK/bin/cr_restart_plain"
    cp "$BIN_DIR/cr_restart" "$WORK/bin/cr_restart"
    chmod 755 "$WORK/bin"/cr_restart*
    # user_restore TOOL ARGS...: the tool as the user; its stdout in restore.out.
    user_restore() {
      local tool=$1
      shift
      rc=0
      timeout 60 "${AS_USER[@]}" "$WORK/bin/$tool" "$@" </dev/null >"$WORK/restore.out" \
        2>"$WORK/tool.err" || rc=$?
    }
    for args in "--detach" "--detach --new-pid"; do
      # shellcheck disable=SC2086
      user_restore cr_restart_plain --dir "$WORK/u/ck" $args
      ((rc != 0 && rc < 124)) || fail "the user's plain cr_restart $args: $(describe_status "$rc")"
      is_one_line "$WORK/tool.err" || fail "cr_restart $args: not exactly one line on stderr"
      grep -q CAP_CHECKPOINT_RESTORE "$WORK/tool.err" ||
        fail "cr_restart $args did not name the capability: $(first_line "$WORK/tool.err")"
      [[ -z $(pgrep -u "$TUID" -x identity) ]] || fail "a process of the user runs after the refusal"
      echo "  plain cr_restart $args -> $(first_line "$WORK/tool.err")"
    done
    setcap cap_checkpoint_restore+ep "$WORK/bin/cr_restart" 2>"$WORK/tool.err" ||
      fail "setcap on $WORK/bin: $(first_line "$WORK/tool.err")"
    user_restore cr_restart --dir "$WORK/u/ck-root" --detach
    ((rc != 0 && rc < 124)) || fail "the capable cr_restart of images claiming uid 0: $(describe_status "$rc")"
    is_one_line "$WORK/tool.err" || fail "claim-root: not exactly one line on stderr"
    echo "  claim-root, capable cr_restart -> $(first_line "$WORK/tool.err")"
    [[ ! -e /proc/$TPID ]] || fail "a process with PID $TPID exists after the refusal"
    user_restore cr_restart --dir "$WORK/u/ck" --detach
    ((rc == 0)) || fail "the capable cr_restart as the user: $(first_line "$WORK/tool.err")"
    RPID=$(tr -dc 0-9 <"$WORK/restore.out")
    [[ $RPID == "$TPID" ]] || fail "restored as PID $RPID, not $TPID"
    uid_line=$(awk '/^Uid:/ { print $2, $3, $4, $5 }' "/proc/$RPID/status")
    caps=$(awk '/^Cap(Inh|Prm|Eff|Amb):/ { printf "%s ", $2 }' "/proc/$RPID/status")
    [[ $uid_line == "$TUID $TUID $TUID $TUID" ]] || fail "restored with uids $uid_line, not $TUID"
    [[ $caps == "0000000000000000 0000000000000000 0000000000000000 0000000000000000 " ]] ||
      fail "restored with capabilities (inheritable, permitted, effective, ambient: $caps)"
    exe=$(readlink "/proc/$RPID/exe")
    [[ $exe == "$WORK/bin/identity" ]] || fail "its executable link is $exe"
    finish "$RPID"
    [[ $(cat "$RDIR/ready.result") == "shadow denied" ]] || fail "the restored process could read /etc/shadow"
    echo "  restored by the user as PID $RPID, uids $uid_line, no capabilities, exe $exe"
    ;;
  refusals)
    mkdir -m 1777 "$WORK/r"
    PROG=$PROG_DIR/identity
    for mode in mempolicy:"NUMA memory policy" nothp:"transparent huge pages disabled"; do
      RDIR=$WORK/r/${mode%%:*}
      mkdir -m 1777 "$RDIR"
      start env -- "${mode%%:*}"
      rc=0
      timeout 60 "$BIN_DIR/cr_full" --dir "$WORK/ck" "$TPID" </dev/null >/dev/null 2>"$WORK/tool.err" || rc=$?
      ((rc != 0 && rc < 124)) || fail "cr_full of a process with ${mode%%:*}: $(describe_status "$rc")"
      is_one_line "$WORK/tool.err" || fail "cr_full (${mode%%:*}): not exactly one line on stderr"
      grep -qF "${mode#*:}" "$WORK/tool.err" || fail "cr_full (${mode%%:*}) did not name it: $(first_line "$WORK/tool.err")"
      echo "  ${mode%%:*} -> $(first_line "$WORK/tool.err")"
      [[ $(proc_state "$TPID") == [RSD] && $(tracer_of "$TPID") == 0 ]] ||
        fail "the target is not left running untraced after the refusal"
      touch "$RDIR/ready.go"
      wait_exit "$TPID" 20 || fail "the target did not end"
      ((EXIT_STATUS == 0)) || fail "the target ended with $(describe_status "$EXIT_STATUS")"
    done
    ;;
  escalation)
    user_checkpoint
    cp -a "$WORK/u/ck" "$WORK/u/ck2"
    cp -a "$WORK/u/ck" "$WORK/u/ck3"
    cp -a "$WORK/u/ck" "$WORK/ck-root"
    "$PROG_DIR/meta_edit" "$WORK/u/ck/gen-000001" claim-root || fail "meta_edit claim-root"
    "$PROG_DIR/meta_edit" "$WORK/u/ck2/gen-000001" drop-credentials || fail "meta_edit drop-credentials"
    "$PROG_DIR/meta_edit" "$WORK/u/ck3/gen-000001" open-file:/etc/shadow || fail "meta_edit open-file"
    "$PROG_DIR/meta_edit" "$WORK/ck-root/gen-000001" claim-root || fail "meta_edit claim-root"
    for d in ck ck2 ck3; do
      rc=0
      timeout 60 "$BIN_DIR/cr_restart" --dir "$WORK/u/$d" --detach </dev/null >/dev/null \
        2>"$WORK/tool.err" || rc=$?
      ((rc != 0)) || fail "cr_restart of the edited images in $d succeeded"
      ((rc < 124)) || fail "cr_restart of $d: $(describe_status "$rc")"
      is_one_line "$WORK/tool.err" || fail "cr_restart of $d: not exactly one line on stderr"
      echo "  $d -> $(first_line "$WORK/tool.err")"
      [[ $d != ck3 ]] || grep -q "could not open /etc/shadow" "$WORK/tool.err" ||
        fail "ck3 refused for another reason: $(first_line "$WORK/tool.err")"
      [[ ! -e /proc/$TPID ]] || fail "a process with PID $TPID exists after the refusal"
    done
    # Control: root could have written anything, so the same claim in images
    # only root can write restores (the refusal was about who wrote them).
    chown -R 0:0 "$WORK/ck-root"
    restore "$WORK/ck-root"
    [[ $(awk '/^Uid:/ { print $2 }' "/proc/$RPID/status") == 0 ]] ||
      fail "root's edited images did not restore as uid 0"
    finish "$RPID"
    ;;
  *)
    fail "unknown test"
    ;;
esac
pass
