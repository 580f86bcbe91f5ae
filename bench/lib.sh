# shellcheck shell=bash disable=SC2154 # report, work, KEEP_WORK, started: set by the caller
# bench/lib.sh: functions shared by the bench scripts (scale.sh, stream.sh,
# load.sh, login-memory.sh). Sourcing it only defines functions; nothing runs.
#
# Conventions: functions answer in REPLY (or the globals named below), as the
# scripts did before. The globals they read or set:
#   report    the report file say() appends to (set by bench_setup)
#   work      the temp dir (set by bench_setup)
#   herald_pid baseline_pid sampler_pid
#             the processes cleanup stops and acct_snapshot counts; empty when
#             not running (all three set to '' by bench_setup)
#   tck       clock ticks per second (set by bench_setup)
#   KEEP_WORK when not empty, cleanup keeps the temp dir
#   started   $SECONDS when say_start ran; say_end reports the time since
#   src       the Herald source dir (set by use_worktree)

# --- messages --------------------------------------------------------------

# die MESSAGE: print "SCRIPT: MESSAGE" on stderr and exit 1.
die() { printf '%s: %s\n' "${0##*/}" "$*" >&2; exit 1; }

# log MESSAGE: print MESSAGE on stderr after the time, "[HH:MM:SS] ".
log() { printf '[%(%T)T] %s\n' -1 "$*" >&2; }

# warn MESSAGE: print MESSAGE on stderr as it is.
warn() { printf '%s\n' "$*" >&2; }

# say MESSAGE: print MESSAGE on stdout and append it to $report.
say() { printf '%s\n' "$*"; printf '%s\n' "$*" >>"$report"; }

# --- checks and tools ------------------------------------------------------

# isint VALUE: true when VALUE is a non-negative integer without leading zeros.
isint() { [[ $1 =~ ^(0|[1-9][0-9]*)$ ]]; }

# need_int NAME VALUE MIN [MAX]: die unless VALUE is an integer, MIN <= VALUE (<= MAX).
need_int() {
  if ! isint "$2" || (($2 < $3)) || { [ -n "${4:-}" ] && (($2 > $4)); }; then
    if [ -n "${4:-}" ]; then
      die "$1 must be an integer from $3 to $4, not \"$2\""
    fi
    die "$1 must be an integer >= $3, not \"$2\""
  fi
}

# need_wrk ANNOUNCE: when wrk is missing, tell so with the function ANNOUNCE (log, warn) and install it from Debian (as root or with sudo).
need_wrk() {
  command -v wrk >/dev/null && return 0
  "$1" "installing wrk (Debian package)"
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq wrk >/dev/null
  else
    sudo apt-get update -qq && sudo apt-get install -y -qq wrk >/dev/null
  fi
}

# above VALUE LIMIT: true when the decimal number VALUE is greater than LIMIT.
above() { awk -v o="$1" -v t="$2" 'BEGIN { exit !(o > t) }'; }

# --- run set-up and clean-up -----------------------------------------------

# bench_setup NAME: report = bench/out/NAME-YYYYmmdd-HHMMSS.txt (emptied), work = a new temp dir herald-NAME.*, no PIDs yet, tck, and the cleanup traps.
bench_setup() {
  local dir
  dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  mkdir -p "$dir/out"
  report="$dir/out/$1-$(date +%Y%m%d-%H%M%S).txt"
  : >"$report"
  work=$(mktemp -d "${TMPDIR:-/tmp}/herald-$1.XXXXXX")
  herald_pid='' baseline_pid='' sampler_pid=''
  tck=$(getconf CLK_TCK)
  trap cleanup EXIT
  trap 'exit 130' INT TERM HUP
}

# stop_pid PID GRACE-SECONDS: TERM, wait up to GRACE, then KILL; REPLY = its exit status ('' when PID is empty).
stop_pid() {
  local pid=$1 grace=$2 i
  REPLY=''
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < grace * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  REPLY=0
  wait "$pid" 2>/dev/null || REPLY=$?
}

# cleanup: the EXIT trap of bench_setup: stop the sampler, baseline and Herald; on failure show Herald's log tail and mark the report; remove $work unless KEEP_WORK.
cleanup() {
  local status=$?
  trap - EXIT
  stop_pid "$sampler_pid" 1
  stop_pid "$baseline_pid" 5
  stop_pid "$herald_pid" 20
  if ((status != 0)); then
    if [ -s "$work/herald.log" ]; then
      echo "--- last lines of herald's log:" >&2
      tail -n 20 "$work/herald.log" >&2
    fi
    printf '\nrun did not complete (exit status %s)\n' "$status" >>"$report"
    echo "partial report: $report" >&2
  fi
  if [ -n "$KEEP_WORK" ]; then
    echo "work directory kept: $work" >&2
  else
    rm -rf "$work"
  fi
  exit "$status"
}

# --- CPU and memory accounting ---------------------------------------------

# cpu_of PID: REPLY = its utime+stime+cutime+cstime in clock ticks (0 when gone).
cpu_of() {
  local line
  local -a f
  REPLY=0
  read -r line 2>/dev/null <"/proc/$1/stat" || return 0
  line=${line##*) }
  read -ra f <<<"$line"
  REPLY=$((f[11] + f[12] + f[13] + f[14]))
}

# machine_busy: REPLY = busy ticks of all CPUs (user nice system irq softirq steal).
machine_busy() {
  local rest
  local -a f
  read -r _ rest </proc/stat
  read -ra f <<<"$rest"
  REPLY=$((f[0] + f[1] + f[2] + f[5] + f[6] + f[7]))
}

# acct_snapshot: ACCT = (microseconds, busy ticks, ticks used by us: this shell with its reaped children plus herald_pid, baseline_pid, sampler_pid, and what the function acct_more answers when the script defines it).
acct_snapshot() {
  local now=${EPOCHREALTIME/./} ours=0 p
  machine_busy
  local busy=$REPLY
  for p in "$$" "$herald_pid" "$baseline_pid" "$sampler_pid"; do
    [ -n "$p" ] || continue
    cpu_of "$p"
    ours=$((ours + REPLY))
  done
  # A script may count more as its own (a database server Herald uses).
  if declare -F acct_more >/dev/null; then
    acct_more
    ours=$((ours + REPLY))
  fi
  ACCT=("$now" "$busy" "$ours")
}

# other_pct T0 BUSY0 OURS0: REPLY = % of one core (one decimal) other processes used since that acct_snapshot.
other_pct() {
  acct_snapshot
  local us=$((ACCT[0] - $1)) other=$(((ACCT[1] - $2) - (ACCT[2] - $3)))
  ((other > 0)) || other=0
  ((us > 0)) || us=1
  local tenths=$((other * 1000 * 1000000 / tck / us))
  REPLY="$((tenths / 10)).$((tenths % 10))"
}

# mem_of PID: REPLY = "RSSANON VMRSS" of PID now, in kB (0 when unknown).
mem_of() {
  local k v anon=0 rss=0
  while read -r k v _; do
    case $k in RssAnon:) anon=$v ;; VmRSS:) rss=$v ;; esac
  done 2>/dev/null <"/proc/$1/status" || true
  REPLY="$anon $rss"
}

# sample_mem PID FILE [INTERVAL]: while PID lives, every INTERVAL s (0.2) write its peak "RSSANON VMRSS" (kB) so far to FILE when one grows.
sample_mem() {
  local pid=$1 out=$2 every=${3:-0.2} anon rss max_anon=0 max_rss=0
  while kill -0 "$pid" 2>/dev/null; do
    mem_of "$pid"
    read -r anon rss <<<"$REPLY"
    if ((anon > max_anon || rss > max_rss)); then
      if ((anon > max_anon)); then max_anon=$anon; fi
      if ((rss > max_rss)); then max_rss=$rss; fi
      printf '%s %s\n' "$max_anon" "$max_rss" >"$out"
    fi
    sleep "$every"
  done
}

# mem_peak_kib FILE: REPLY = "RSSANON VMRSS" peaks (kB) that sample_mem wrote to FILE ("0 0" when none).
mem_peak_kib() {
  local anon=0 rss=0
  if [ -s "$1" ]; then read -r anon rss <"$1" || true; fi
  REPLY="$anon $rss"
}

# mem_peak [FILE]: REPLY = "RssAnon N MiB, VmRSS M MiB", the peaks sample_mem wrote to FILE ($work/mem) so far.
mem_peak() {
  local anon rss
  mem_peak_kib "${1:-$work/mem}"
  read -r anon rss <<<"$REPLY"
  REPLY="RssAnon $((anon / 1024)) MiB, VmRSS $((rss / 1024)) MiB"
}

# --- servers ---------------------------------------------------------------

# wait_listen LOG PID TRIES: REPLY = the addr= (text) or "addr" (JSON) of a "listening" line in LOG, polled every 0.1 s TRIES times while PID lives; false when none.
wait_listen() {
  local logf=$1 pid=$2 tries=$3 i line
  REPLY=''
  for ((i = 0; i < tries; i++)); do
    if [ -s "$logf" ]; then
      while IFS= read -r line; do
        case $line in *listening*) ;; *) continue ;; esac
        if [[ $line =~ \"addr\":\"([^\"]+)\" ]]; then
          REPLY=${BASH_REMATCH[1]}
        elif [[ $line =~ (^|[[:space:]])addr=\"?([^[:space:]\"]+) ]]; then
          REPLY=${BASH_REMATCH[2]}
        fi
        [ -z "$REPLY" ] || break
      done <"$logf"
    fi
    [ -z "$REPLY" ] || return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$REPLY" ]
}

# listen_addr LOG PID NAME: REPLY = the 127.0.0.1 address server NAME logged within 30 s; else show LOG and die.
listen_addr() {
  local logf=$1 pid=$2 name=$3
  if ! wait_listen "$logf" "$pid" 300; then
    cat "$logf" >&2 || true
    die "$name did not report a listening address"
  fi
  [[ $REPLY =~ ^127\.0\.0\.1:[0-9]+$ ]] || die "$name listens on $REPLY, not on 127.0.0.1"
}

# go_build DIR PACKAGE OUT WHAT [FAILURE]: log "building WHAT", build PACKAGE in DIR to OUT; on failure die with FAILURE ("building WHAT failed").
go_build() {
  log "building $4"
  (cd "$1" && go build -buildvcs=false -o "$3" "$2") || die "${5:-building $4 failed}"
}

# --- report lines ----------------------------------------------------------

# say_start TITLE [EXTRA]: started = now; say "TITLE, <UTC time>" and the host line (nproc, load average, go version[, EXTRA]).
say_start() {
  local la1 la5 la15
  started=$SECONDS
  say "$1, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  read -r la1 la5 la15 _ </proc/loadavg
  say "host: nproc $(nproc), load average at start $la1 $la5 $la15, $(go version)${2+, $2}"
}

# use_worktree DIR: src = DIR made absolute (die when it is not a directory); say "herald: working tree DIR at REV[ plus uncommitted changes]".
use_worktree() {
  local desc='' rev
  src=$(cd "$1" && pwd) || die "HERALD_SRC $1 is not a directory"
  if rev=$(git -C "$src" rev-parse --short HEAD 2>/dev/null); then
    desc=" at $rev"
    if [ -n "$(git --no-optional-locks -C "$src" status --porcelain -- . ':(exclude)bench' 2>/dev/null | head -n 1)" ]; then
      desc="$desc plus uncommitted changes"
    fi
  fi
  say "herald: working tree $src$desc"
}

# say_end REPO: say the load average at the end, the total time since say_start and where the report is (relative to REPO).
say_end() {
  local la1 la5 la15
  read -r la1 la5 la15 _ </proc/loadavg
  say "load average at the end $la1 $la5 $la15; total time $((SECONDS - started))s"
  say "report saved to ${report#"$1"/}"
}
