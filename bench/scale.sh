#!/usr/bin/env bash
# bench/scale.sh: a reproducible load benchmark for Herald with a realistic
# amount of data.
#
# It builds Herald and a do-nothing baseline server (bench/baseline), starts
# them on 127.0.0.1 with ports the kernel picks, one Herald for each store in
# STORES with a fresh database in a temp dir, fills each Herald with MESSAGES
# messages THROUGH THE API (wrk + bench/fill.lua, about 10 users, varied
# content from bench/content.lua), then drives each workload with wrk at
# every connection count in CONNS_LIST and prints one table per store and
# count: requests/s, p50 and p99 latency, non-2xx answers and socket errors,
# throughput as a ratio to the baseline server and p99 as a multiple of the
# baseline's p99. Each workload runs on one store and right after on the
# other (for the reads and creates, which goes first alternates), so both
# stores' figures come from the same moments of the machine; with ROUNDS
# above 1 the series repeats and the tables give each workload's median
# run. Every count's reads run before any create. The baseline is
# measured before a count's reads and again after its creates and logins;
# the ratios use the mean, and both are printed so drift is visible. This
# machine is shared: ratios to the baseline drift less than absolute
# numbers, and the script measures how much CPU other processes took while
# it ran and warns when that is a lot.
#
# Usage (from a fresh clone; root, or sudo for apt-get, installs wrk if
# missing):
#   bench/scale.sh                               # defaults, a few minutes
#   MESSAGES=5000 DURATION=2s bench/scale.sh     # quick check
#   HERALD_REF=HEAD bench/scale.sh               # benchmark committed code,
#                                                # not the working tree
#
# Environment:
#   STORES="bolt postgres"
#                       the stores to run Herald on, side by side in this
#                       run, each filled afresh: bolt (a file) and postgres
#                       (a throwaway PostgreSQL server on a Unix socket,
#                       bench/pg.sh, with its durable defaults: fsync and
#                       synchronous_commit on; installed from Debian when
#                       missing). With both, a last table gives each
#                       PostgreSQL figure as a ratio to bbolt's run next to
#                       it: the median over the rounds, the lowest and the
#                       highest.
#   ROUNDS=1            times every workload runs on every store (every
#                       count's reads first, then the creates; login once);
#                       odd is best: with an even number the median is the
#                       lower of the two middle runs
#   MESSAGES=100000     messages created through the API before the workloads
#   DURATION=5s         length of every wrk run (wrk syntax: 5s, 1m)
#   CONNS_LIST="16 64"  connection counts, one table each
#   THREADS=2           wrk threads
#   USERS=10            accounts that post the messages (1..20: registration
#                       may be limited to 100 per address per hour)
#   FILL_CONNS=64       wrk connections used for the fill
#   FILL_MAX=300        seconds the fill may take at most; when it runs out the
#                       workloads run on what was created, and the report
#                       says so
#   WRK_TIMEOUT=10s     wrk's per-request timeout; slower answers are errors
#   SEED=1              seed for message content and random ids
#   HERALD_SRC=DIR      Go module to build Herald from (default: the
#                       repository this script is in)
#   HERALD_REF=REV      build Herald from this git revision of the script's
#                       repository instead (git archive into the temp dir;
#                       nothing in the repository is touched)
#   BUSY_WARN_PCT=15    warn when other processes used more than this
#                       percentage of one core during the run
#   SETTLE_MAX=15       seconds to wait at most, between runs, for Herald to
#                       finish work that wrk abandoned
#   KEEP_WORK=1         keep the temp dir (database, logs, wrk output)
#
# Workloads: create (POST /api/messages), list_newest_20
# (GET /api/messages?limit=20), get_by_id (random ids in the filled range),
# search_common (?q=apple, ~30% of messages), search_two_words
# (?q=apple+river, ~6%), search_rare (?q=zephyr, ~1 in 10,000), owner_filter
# (?owner=user3@example.com), deep_page_50 (the 50th page of limit=20,
# reached by following "next" cursors), login (POST /api/login; argon2id, slow
# by design, with an account of its own), and list_beside_costly: list newest
# 20 again while as many connections more send costly_16_words, the worst
# search there is (the 16 most frequent filler words of the newest messages:
# each common, all 16 in one message almost never, so every page spends the
# whole step budget); both rows are in the table.
#
# Output: progress on stderr; the report (host, settings, for each store
# its fill rate, the tables, Herald's peak RssAnon and VmRSS sampled every
# 200 ms through its runs, CPU used by other processes — PostgreSQL's
# server and the idle Herald of the other store count as ours, not as other
# processes) on stdout and in bench/out/scale-YYYYmmdd-HHMMSS.txt
# (gitignored). Table columns: req/s and
# requests (answers that finished within the run), p50/p99 latency, non-2xx
# (wrk's count of answers with status >= 400), errors (socket errors and
# timeouts), ratio (req/s / the baseline's mean req/s), p99 x bl (p99 / the
# baseline's mean p99), other% (CPU other processes used during that run,
# in % of one core; above BUSY_WARN_PCT the figures are suspect), herald us
# and db us (CPU Herald and, on PostgreSQL, its server spent per answer,
# in µs: user and system time from /proc over the run, divided by the
# answers).
#
# Only 127.0.0.1 is contacted, no port is fixed, every wrk run is bounded by
# a duration, and the servers are stopped by PID on exit.
set -euo pipefail

bench=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$bench/.." && pwd)
# shellcheck source=bench/lib.sh
. "$bench/lib.sh"
# shellcheck source=bench/pg.sh
. "$bench/pg.sh"

STORES=${STORES:-bolt postgres}
MESSAGES=${MESSAGES:-100000}
DURATION=${DURATION:-5s}
CONNS_LIST=${CONNS_LIST:-16 64}
THREADS=${THREADS:-2}
USERS=${USERS:-10}
FILL_CONNS=${FILL_CONNS:-64}
FILL_MAX=${FILL_MAX:-300}
WRK_TIMEOUT=${WRK_TIMEOUT:-10s}
SEED=${SEED:-1}
HERALD_SRC=${HERALD_SRC:-$repo}
HERALD_REF=${HERALD_REF:-}
BUSY_WARN_PCT=${BUSY_WARN_PCT:-15}
SETTLE_MAX=${SETTLE_MAX:-15}
ROUNDS=${ROUNDS:-1}
KEEP_WORK=${KEEP_WORK:-}
FILL_PROBE=5 # seconds of the first fill round, which measures the create rate

need_int MESSAGES "$MESSAGES" 1
need_int USERS "$USERS" 1 20
need_int THREADS "$THREADS" 1
need_int FILL_CONNS "$FILL_CONNS" "$THREADS"
need_int FILL_MAX "$FILL_MAX" 10
need_int SEED "$SEED" 0
need_int BUSY_WARN_PCT "$BUSY_WARN_PCT" 0
need_int SETTLE_MAX "$SETTLE_MAX" 0
need_int ROUNDS "$ROUNDS" 1
[[ $DURATION =~ ^[0-9]+[smh]?$ ]] || die "DURATION must be like 5s or 1m"
[[ $WRK_TIMEOUT =~ ^[0-9]+[smh]?$ ]] || die "WRK_TIMEOUT must be like 10s"
for c in $CONNS_LIST; do
  need_int "a CONNS_LIST entry" "$c" "$THREADS"
done
[ -n "${CONNS_LIST// /}" ] || die "CONNS_LIST is empty"
seen_stores=' '
for st in $STORES; do
  [[ $st == bolt || $st == postgres ]] || die "STORES may name bolt and postgres, not \"$st\""
  [[ $seen_stores != *" $st "* ]] || die "STORES names $st twice"
  seen_stores+="$st "
done
[ -n "${STORES// /}" ] || die "STORES is empty"

for tool in go curl git; do
  command -v "$tool" >/dev/null || die "$tool is required"
done
need_wrk log
if [[ " $STORES " == *" postgres "* ]]; then need_postgres log; fi

# Report, temp dir, clean-up on exit; CPU and memory accounting: bench/lib.sh.
bench_setup scale
# Every store's Herald runs from its fill to the end of the run; these hold
# what use_store makes current: its PID, address, token, log, and so on.
declare -A st_pid=() st_sampler=() st_base=() st_auth=() st_tokens=() st_maxid=() \
  st_owner=() st_deep_name=() st_deep_path=() st_costly=() st_login=() st_errors=()

# stop_heralds: stop every store's Herald and sampler that still runs; after
# a failure, show the end of each one's log.
stop_heralds() {
  local st
  for st in "${!st_pid[@]}"; do
    if [ -n "${1:-}" ] && [ -s "$work/herald-$st.log" ]; then
      echo "--- last lines of herald's log on $st:" >&2
      tail -n 20 "$work/herald-$st.log" >&2
    fi
    stop_pid "${st_sampler[$st]:-}" 1
    stop_pid "${st_pid[$st]:-}" 20
    st_pid[$st]='' st_sampler[$st]=''
  done
  herald_pid='' sampler_pid=''
}

# The Heralds, then the PostgreSQL server they use, then lib.sh's cleanup.
# set +e: under errexit the failing (exit) would end the trap before
# cleanup stops the servers it started.
trap 'status=$?; set +e; if ((status != 0)); then stop_heralds failed; else stop_heralds; fi; pg_stop; (exit "$status"); cleanup' EXIT

# --- servers ---------------------------------------------------------------

# settle: wait until Herald is idle (under 10% of a core for 0.3 s), at most
# SETTLE_MAX seconds, so work wrk abandoned does not slow the next run.
settle() {
  local start=$SECONDS a
  while :; do
    store_cpu
    a=$REPLY
    sleep 0.3
    store_cpu
    if ((REPLY - a <= tck * 3 / 100)); then break; fi
    if ((SECONDS - start >= SETTLE_MAX)); then
      log "herald still busy after ${SETTLE_MAX}s; going on"
      break
    fi
  done
}

# store_cpu: REPLY = CPU ticks of Herald and, on PostgreSQL, of its server.
store_cpu() {
  local h
  cpu_of "$herald_pid"
  h=$REPLY
  REPLY=0
  if [ -n "${pg_pid:-}" ]; then pg_cpu; fi
  REPLY=$((REPLY + h))
}

# serving_cpu: REPLY = "HERALD DB": CPU ticks of the current Herald and,
# when it runs on PostgreSQL, of PostgreSQL's server (else 0).
serving_cpu() {
  local h
  cpu_of "$herald_pid"
  h=$REPLY
  REPLY=0
  if [ "$store_name" = postgres ]; then pg_cpu; fi
  REPLY="$h $REPLY"
}

# cpu_per_request "H0 D0" "H1 D1" RESULT_LINE: REPLY = "herald_us=.. db_us=..",
# the CPU Herald and its database server spent on one answer, in µs, over
# the run between the two serving_cpu readings; empty when no answer
# finished. What a workload costs each process shows where a store's
# time goes, and a ratio's ceiling: Herald's share alone bounds it.
cpu_per_request() {
  local -a a b
  local requests
  read -ra a <<<"$1"
  read -ra b <<<"$2"
  requests=$(sed -n 's/.* requests=\([0-9]*\).*/\1/p' <<<"$3")
  REPLY=''
  ((${requests:-0} > 0)) || return 0
  REPLY=$(awk -v h=$((b[0] - a[0])) -v d=$((b[1] - a[1])) -v t="$tck" -v n="$requests" \
    'BEGIN { printf "herald_us=%.1f db_us=%.1f", 1e6 * h / t / n, 1e6 * d / t / n }')
}

# acct_more: lib.sh's acct_snapshot adds this to what this run uses (it
# counts the current Herald and sampler itself), so neither the PostgreSQL
# server nor the Herald of the other store, idle beside the one measured,
# is counted as another process.
acct_more() {
  local total=0 st p
  if [ -n "${pg_pid:-}" ]; then
    pg_cpu
    total=$REPLY
  fi
  for st in "${!st_pid[@]}"; do
    for p in "${st_pid[$st]}" "${st_sampler[$st]}"; do
      [ -n "$p" ] && [ "$p" != "$herald_pid" ] && [ "$p" != "$sampler_pid" ] || continue
      cpu_of "$p"
      total=$((total + REPLY))
    done
  done
  REPLY=$total
}

# scan_log: count ERROR lines in the current Herald's log, keep a few, then
# empty the log (it holds one access line per request; Herald appends, so
# emptying is safe).
scan_log() {
  local n logf="$work/herald-$store_name.log"
  n=$(grep -c -E 'level=ERROR|"level":"ERROR"' "$logf" || true)
  if ((n > 0)); then
    st_errors[$store_name]=$((${st_errors[$store_name]:-0} + n))
    grep -E 'level=ERROR|"level":"ERROR"' "$logf" | head -n 3 >>"$work/errors-$store_name" || true
  fi
  : >"$logf"
}

# --- HTTP helpers (curl, bounded) ------------------------------------------

# api METHOD PATH [curl args]: body in $work/resp, headers in $work/resp.h,
# REPLY = status code (000 when curl failed).
api() {
  local method=$1 path=$2
  shift 2
  REPLY=$(curl -sS --max-time 60 -o "$work/resp" -D "$work/resp.h" -w '%{http_code}' \
    -X "$method" "$base$path" "$@" 2>"$work/curl.err") || REPLY=000
}

json_field() { # FIELD: REPLY = the first "FIELD":"value" string in $work/resp
  REPLY=$(sed -n "s/.*\"$1\":[[:space:]]*\"\\([^\"]*\\)\".*/\\1/p" "$work/resp" | head -n 1)
}

retry_after() { # REPLY = the Retry-After header of the last answer, capped at 10 s
  REPLY=$(sed -n 's/^[Rr]etry-[Aa]fter:[[:space:]]*\([0-9]*\).*/\1/p' "$work/resp.h" | head -n 1)
  isint "${REPLY:-x}" || REPLY=1
  ((REPLY <= 10)) || REPLY=10
  ((REPLY >= 1)) || REPLY=1
}

# account ENDPOINT BODY: POST it, tolerating 429/503 (reported, retried after
# Retry-After up to 3 times). REPLY = the token, empty on failure.
account() {
  local endpoint=$1 body=$2 try
  for try in 1 2 3 4; do
    api POST "/api/$endpoint" -H 'Content-Type: application/json' -d "$body"
    local code=$REPLY
    case $code in
    200 | 201)
      json_field token
      return 0
      ;;
    429 | 503)
      retry_after
      say "note: $endpoint answered $code (Retry-After ${REPLY}s), attempt $try"
      ((try < 4)) && sleep "$REPLY"
      ;;
    *)
      log "$endpoint answered $code: $(head -c 300 "$work/resp" 2>/dev/null; cat "$work/curl.err")"
      REPLY=''
      return 0
      ;;
    esac
  done
  REPLY=''
}

# newest_id: REPLY = the id of the newest message (0 when there is none).
newest_id() {
  api GET '/api/messages?limit=1' -H "$auth"
  [ "$REPLY" = 200 ] || die "GET /api/messages?limit=1 answered $REPLY"
  REPLY=$(grep -o '"id":[[:space:]]*[0-9]*' "$work/resp" | head -n 1 | grep -o '[0-9]*$' || true)
  REPLY=${REPLY:-0}
}

# wait_stable_id: REPLY = the newest id once it stops changing (creates still
# in flight when wrk stopped land after it returns), waiting 30 s at most.
wait_stable_id() {
  local prev=-1 i
  for ((i = 0; i < 60; i++)); do
    newest_id
    [ "$REPLY" != "$prev" ] || return 0
    prev=$REPLY
    sleep 0.5
  done
}

# --- wrk -------------------------------------------------------------------

# bench_run NAME CONNS RESULTS [wrk args]: one wrk run of DURATION; appends
# "NAME rps=.. p50_ms=.. p99_ms=.. errors=.. non2xx=.. other=.." to RESULTS.
bench_run() {
  local name=$1 conns=$2 results=$3
  shift 3
  kill -0 "$herald_pid" 2>/dev/null || die "herald is no longer running"
  local out="$work/wrk-$name-$conns.out"
  log "$name, $conns connections, $DURATION"
  acct_snapshot
  local a0=${ACCT[0]} a1=${ACCT[1]} a2=${ACCT[2]}
  serving_cpu
  local s0=$REPLY line=''
  if wrk -t"$THREADS" -c"$conns" -d"$DURATION" --timeout "$WRK_TIMEOUT" "$@" >"$out" 2>&1; then
    line=$(grep '^RESULT ' "$out" | tail -n 1 || true)
  fi
  serving_cpu
  local s1=$REPLY
  other_pct "$a0" "$a1" "$a2"
  local other=$REPLY
  if [ -z "$line" ]; then
    log "wrk failed for $name:"
    cat "$out" >&2
    printf '%s FAILED other=%s\n' "$name" "$other" >>"$results"
  else
    local cpu=''
    if [[ $name != baseline_* ]]; then
      cpu_per_request "$s0" "$s1" "$line"
      cpu=$REPLY
    fi
    printf '%s %s other=%s%s\n' "$name" "${line#RESULT }" "$other" "${cpu:+ $cpu}" >>"$results"
  fi
  settle
  scan_log
}

# costly_run CONNS RESULTS: list newest 20 (list_beside_costly) while CONNS
# more connections send the costly search (costly_16_words), which starts a
# second before and ends a second after, so it covers the whole measured
# run. Both go in RESULTS, with one figure for other processes: the costly
# wrk is this script's child, counted as ours once it has been waited for.
costly_run() {
  local conns=$1 results=$2
  kill -0 "$herald_pid" 2>/dev/null || die "herald is no longer running"
  local out="$work/wrk-list_beside_costly-$conns.out" cout="$work/wrk-costly_16_words-$conns.out"
  [[ $DURATION =~ ^([0-9]+)([smh]?)$ ]]
  local secs=${BASH_REMATCH[1]}
  case ${BASH_REMATCH[2]} in m) secs=$((secs * 60)) ;; h) secs=$((secs * 3600)) ;; esac
  log "list_beside_costly and costly_16_words, $conns connections each, $DURATION"
  acct_snapshot
  local a0=${ACCT[0]} a1=${ACCT[1]} a2=${ACCT[2]}
  wrk -t"$THREADS" -c"$conns" -d"$((secs + 2))s" --timeout "$WRK_TIMEOUT" -s "$bench/report.lua" -H "$auth" \
    "$base$costly_path" >"$cout" 2>&1 &
  local costly_pid=$! line='' cline=''
  sleep 1
  if wrk -t"$THREADS" -c"$conns" -d"$DURATION" --timeout "$WRK_TIMEOUT" -s "$bench/report.lua" -H "$auth" \
    "$base/api/messages?limit=20" >"$out" 2>&1; then
    line=$(grep '^RESULT ' "$out" | tail -n 1 || true)
  fi
  if wait "$costly_pid"; then
    cline=$(grep '^RESULT ' "$cout" | tail -n 1 || true)
  fi
  other_pct "$a0" "$a1" "$a2"
  local other=$REPLY name l
  for name in list_beside_costly costly_16_words; do
    if [ "$name" = list_beside_costly ]; then l=$line; else l=$cline; fi
    if [ -z "$l" ]; then
      log "wrk failed for $name:"
      cat "$work/wrk-$name-$conns.out" >&2
      printf '%s FAILED other=%s\n' "$name" "$other" >>"$results"
    else
      printf '%s %s other=%s\n' "$name" "${l#RESULT }" "$other" >>"$results"
    fi
  done
  settle
  scan_log
}

# table CONNS FILE...: print the current store's table of one connection
# count from the results in FILE... (the block's baselines and the store's
# runs). With ROUNDS above 1 a workload has a run a round; its row is the
# median run by req/s.
table() {
  local conns=$1 t
  shift
  t=$(awk -v conns="$conns" -v threads="$THREADS" -v dur="$DURATION" -v store="$store_name" -v rounds="$ROUNDS" '
    {
      if (!($1 in count)) names[++n] = $1
      k = ++count[$1]
      if ($2 == "FAILED") failed[$1, k] = 1
      for (i = 2; i <= NF; i++) { split($i, kv, "="); v[$1, k, kv[1]] = kv[2] }
    }
    # median(s): the index of the median run of s by req/s among those wrk
    # finished; 0 when there is none.
    function median(s,    k, m, j, i, tmp, idx) {
      m = 0
      for (k = 1; k <= count[s]; k++) if (!failed[s, k]) idx[++m] = k
      if (m == 0) return 0
      for (j = 2; j <= m; j++) {
        tmp = idx[j]
        for (i = j - 1; i > 0 && v[s, idx[i], "rps"] + 0 > v[s, tmp, "rps"] + 0; i--) idx[i + 1] = idx[i]
        idx[i + 1] = tmp
      }
      return idx[int((m + 1) / 2)]
    }
    function row(label, s,    k) {
      k = median(s)
      if (k == 0) { printf "%-18s %10s\n", label, "wrk failed"; return }
      if (v[s, k, "requests"] == 0) {
        printf "%-18s %10.0f %8d %9s %9s %8d %7d %7.3f %9s %7s\n", label, 0, 0, "-", "-",
          v[s, k, "non2xx"], v[s, k, "errors"], 0, "-", v[s, k, "other"]
        notes = notes sprintf("%s: no answer finished within %s, so no latency figures\n", label, dur)
        return
      }
      printf "%-18s %10.0f %8d %9.2f %9.2f %8d %7d %7.3f %9.1f %7s %9s %7s\n", label,
        v[s, k, "rps"], v[s, k, "requests"], v[s, k, "p50_ms"], v[s, k, "p99_ms"], v[s, k, "non2xx"], v[s, k, "errors"],
        (brps > 0 ? v[s, k, "rps"] / brps : 0), (bp99 > 0 ? v[s, k, "p99_ms"] / bp99 : 0), v[s, k, "other"],
        dash(v[s, k, "herald_us"]), dash(v[s, k, "db_us"])
    }
    function dash(x) { return x == "" ? "-" : x }
    END {
      # The mean of the baselines that finished: one that failed is not a 0.
      nb = 0
      for (k = 0; k < 2; k++) {
        s = k ? "baseline_end" : "baseline_start"
        if (!failed[s, 1] && v[s, 1, "rps"] > 0) { brps += v[s, 1, "rps"]; bp99 += v[s, 1, "p99_ms"]; nb++ }
      }
      if (nb > 0) { brps /= nb; bp99 /= nb }
      printf "== %s: %d connections, %d threads, %s per run", store, conns, threads, dur
      if (rounds > 1) printf ", the median of %d rounds", rounds
      printf " ==\n"
      printf "%-18s %10s %8s %9s %9s %8s %7s %7s %9s %7s %9s %7s\n", "workload", "req/s", "requests", "p50 ms",
        "p99 ms", "non-2xx", "errors", "ratio", "p99 x bl", "other%", "herald us", "db us"
      row("baseline (start)", "baseline_start")
      row("baseline (end)", "baseline_end")
      printf "%-18s %10.0f %8s %9s %9.2f %8s %7s %7.3f %9.1f\n", "baseline (mean)", brps, "", "", bp99, "", "", 1, 1
      for (i = 1; i <= n; i++) if (names[i] !~ /^baseline_/) row(names[i], names[i])
      if (v["baseline_start", 1, "rps"] > 0)
        printf "baseline drift: end/start throughput %.3f, p99 %.2f ms -> %.2f ms\n",
          v["baseline_end", 1, "rps"] / v["baseline_start", 1, "rps"],
          v["baseline_start", 1, "p99_ms"], v["baseline_end", 1, "p99_ms"]
      printf "%s", notes
    }' "$@")
  say "$t"
}

# === run ===================================================================

say_start "Herald scale benchmark" "$(wrk -v 2>&1 | head -n 1 | cut -d' ' -f1-2 || true)"

# Sources.
if [ -n "$HERALD_REF" ]; then
  rev=$(git -C "$repo" rev-parse --verify --short "$HERALD_REF^{commit}") || die "HERALD_REF $HERALD_REF is not a commit"
  mkdir "$work/src"
  git -C "$repo" archive --format=tar "$rev" | tar -x -C "$work/src"
  src="$work/src"
  if [ "$rev" = "$HERALD_REF" ]; then label=$rev; else label="$HERALD_REF ($rev)"; fi
  say "herald: git revision $label of $repo, exported to the temp dir"
else
  use_worktree "$HERALD_SRC"
fi
say "settings: MESSAGES=$MESSAGES ROUNDS=$ROUNDS DURATION=$DURATION CONNS_LIST=\"$CONNS_LIST\" THREADS=$THREADS USERS=$USERS FILL_CONNS=$FILL_CONNS WRK_TIMEOUT=$WRK_TIMEOUT SEED=$SEED"

if [ -n "$HERALD_REF" ]; then hint="a revision that builds"; else hint="HERALD_REF=HEAD to build the last commit"; fi
go_build "$src" . "$work/herald" "herald from $src" "building herald from $src failed; try $hint"
go_build "$repo" ./bench/baseline "$work/baseline" bench/baseline

# The baseline runs through every store's runs; each store has a Herald of
# its own, on a database of its own.
"$work/baseline" -addr 127.0.0.1:0 2>"$work/baseline.log" &
baseline_pid=$!
listen_addr "$work/baseline.log" "$baseline_pid" baseline
baseline_url="http://$REPLY/healthz"
if [[ " $STORES " == *" postgres "* ]]; then
  log "starting PostgreSQL (bench/pg.sh) in $work/pg"
  pg_start "$work/pg"
  pg_bin
  say "postgres: $("$REPLY/postgres" --version), fsync and synchronous_commit on (PostgreSQL's defaults), on a Unix socket"
fi

acct_snapshot
run_acct=("${ACCT[@]}")

# prepare_store STORE: start Herald on STORE (bolt or postgres), fill it,
# check what the searches find and keep what its workloads need in the st_
# arrays. Its Herald runs on until finish_store.
prepare_store() {
  store_name=$1
  local db_arg logf="$work/herald-$1.log"
  : >"$logf"
  if [ "$store_name" = postgres ]; then
    pg_createdb herald_bench
    db_arg=$REPLY
  else
    db_arg="$work/herald.db"
  fi
  say ""
  say "=== store: $store_name ==="
  # Servers and samplers. Herald's log is opened for appending so scan_log can
  # empty it while Herald runs.
  # The guessing and write limits are opened wide: every client here is one
  # address, the login workload measures hashing throughput, not the
  # limiter, and the fill and create workloads write from a handful of
  # accounts as fast as they can, which the default write limit would stop
  # after 60 writes each (the limiter's cost is still paid on every write).
  # Older builds, without these variables, ignore them.
  HERALD_ADDR=127.0.0.1:0 HERALD_DB="$db_arg" \
    HERALD_LOGIN_FAILURES_PER_ACCOUNT=1000000000/1ms HERALD_LOGIN_FAILURES_PER_ADDRESS=1000000000/1ms \
    HERALD_REGISTRATIONS_PER_ADDRESS=1000000000/1ms HERALD_WRITES_PER_ACCOUNT=1000000000/1ms \
    "$work/herald" 2>>"$logf" &
  herald_pid=$!
  st_pid[$store_name]=$herald_pid # from now on the EXIT trap stops it
  listen_addr "$logf" "$herald_pid" "herald on $store_name"
  base="http://$REPLY"
  sample_mem "$herald_pid" "$work/mem-$store_name" &
  sampler_pid=$!
  st_sampler[$store_name]=$sampler_pid
  log "herald at $base (pid $herald_pid), baseline at $baseline_url (pid $baseline_pid)"

  # Accounts: one for the login workload alone (logins add tokens, which may
  # push out old ones), USERS for the messages.
  login_email=login@example.com
  login_password='login bench password'
  login_body="{\"username\":\"$login_email\",\"password\":\"$login_password\"}"
  account register "{\"email\":\"$login_email\",\"password\":\"$login_password\"}"
  have_login_user=${REPLY:+yes}
  tokens=() emails=()
  for ((u = 1; u <= USERS; u++)); do
    account register "{\"email\":\"user$u@example.com\",\"password\":\"bench password $u\"}"
    if [ -n "$REPLY" ]; then
      tokens+=("$REPLY")
      emails+=("user$u@example.com")
    fi
  done
  ((${#tokens[@]} > 0)) || die "no user could register"
  ((${#tokens[@]} == USERS)) || say "note: only ${#tokens[@]} of $USERS users registered"
  auth="Authorization: Bearer ${tokens[0]}"
  if [ -n "$have_login_user" ]; then
    account login "$login_body"
    [ -n "$REPLY" ] || { say "note: logging in as $login_email failed; no login workload"; have_login_user=''; }
  else
    say "note: $login_email could not register; no login workload"
  fi
  owner=${emails[2]:-${emails[${#emails[@]} - 1]}}

  # Fill through the API until MESSAGES exist: a short first round measures the
  # create rate, later rounds are sized from it; fill.lua stops at its quota.
  # The whole fill is bounded by FILL_MAX seconds.
  newest_id
  have=$REPLY
  fill_start=${EPOCHREALTIME/./}
  round=0 rate=0 stalls=0 fill_failed=0 fill_cut=''
  while ((have < MESSAGES)); do
    left=$((FILL_MAX - (${EPOCHREALTIME/./} - fill_start) / 1000000))
    if ((left < 2)); then
      fill_cut=yes
      break
    fi
    round=$((round + 1))
    remaining=$((MESSAGES - have))
    if ((rate == 0)); then d=$FILL_PROBE; else d=$((remaining * 125 / 100 / rate + 2)); fi
    ((d <= left)) || d=$left
    log "fill round $round: $remaining messages to go, at most ${d}s"
    wrk -t"$THREADS" -c"$FILL_CONNS" -d"${d}s" --timeout "$WRK_TIMEOUT" -s "$bench/fill.lua" "$base" \
      -- "$remaining" "$THREADS" "$((SEED * 1000 + round))" "${tokens[@]}" >"$work/fill-$round.out" 2>&1 ||
      { cat "$work/fill-$round.out" >&2; die "wrk failed during the fill"; }
    settle
    wait_stable_id
    scan_log
    fill_line=$(grep '^FILL ' "$work/fill-$round.out" || true)
    created=$(sed -n 's/.*created=\([0-9]*\).*/\1/p' <<<"$fill_line")
    failed=$(sed -n 's/.*failed=\([0-9]*\).*/\1/p' <<<"$fill_line")
    fill_failed=$((fill_failed + ${failed:-0}))
    log "fill round $round: newest id $have -> $REPLY (wrk saw ${created:-?} created, ${failed:-?} failed)"
    if ((REPLY <= have)); then
      stalls=$((stalls + 1))
      ((stalls < 3)) || die "the fill makes no progress; see $work/fill-$round.out"
    fi
    rate=$(((REPLY - have) / d))
    ((rate >= 1)) || rate=1
    have=$REPLY
  done
  fill_us=$((${EPOCHREALTIME/./} - fill_start))
  maxid=$have
  ((maxid >= 1)) || die "no message could be created"
  if [ -n "$fill_cut" ]; then
    say "WARNING: the fill ran out of time (FILL_MAX=${FILL_MAX}s) at $maxid of $MESSAGES messages; the workloads run on $maxid"
  fi
  say "fill: $maxid messages by ${#tokens[@]} users in $((fill_us / 1000000)).$((fill_us / 100000 % 10))s over $round wrk rounds (${FILL_CONNS} connections): $((maxid * 1000000 / (fill_us > 0 ? fill_us : 1))) messages/s overall; $fill_failed non-2xx answers"
  if [ "$store_name" = postgres ]; then
    # A database just filled has no statistics and no visibility map yet;
    # autovacuum gets there in time, mid-run here. Done now, every run
    # measures the steady state, and autovacuum has nothing left to do.
    log "vacuuming and analysing the filled database"
    pg_psql herald_bench "VACUUM ANALYZE"
    # Herald chooses how to run a search with words from these statistics,
    # and reads them every 15 s (pg.DefaultTermStatsEvery): the searches
    # measured must run with the plans of the analysed database.
    sleep 16
    say "postgres: VACUUM ANALYZE after the fill, as autovacuum would do in time, and 16 s for Herald to read its statistics"
  fi
  db_mib
  say "herald after the fill: database $REPLY MiB, peak so far $(mem_peak "$work/mem-$store_name"; echo "$REPLY")"

  # What the searches find (one request each, on an idle server).
  declare -gA search_path=(
    [search_common]="/api/messages?q=apple"
    [search_two_words]="/api/messages?q=apple+river"
    [search_rare]="/api/messages?q=zephyr"
    [owner_filter]="/api/messages?owner=$owner"
  )
  for name in search_common search_two_words search_rare owner_filter; do
    path=${search_path[$name]}
    t0=${EPOCHREALTIME/./}
    api GET "$path&limit=100" -H "$auth"
    code=$REPLY
    ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
    items=$(grep -o '"id":' "$work/resp" | wc -l || true)
    json_field next
    more=${REPLY:+ (more pages)}
    say "$(printf 'check %-16s HTTP %s in %5d ms: %3d matches on a page of 100%s  %s' "$name" "$code" "$ms" "$items" "$more" "$path")"
  done

  # deep_page_50: follow "next" from the first page of limit=20 49 times.
  deep_path='/api/messages?limit=20'
  deep_page=1
  while ((deep_page < 50)); do
    api GET "$deep_path" -H "$auth"
    [ "$REPLY" = 200 ] || die "GET $deep_path answered $REPLY"
    json_field next
    [ -n "$REPLY" ] || break
    deep_path="/api/messages?limit=20&cursor=$REPLY"
    deep_page=$((deep_page + 1))
  done
  deep_name=deep_page_$deep_page
  ((deep_page == 50)) || say "note: only $deep_page pages of 20 exist; the deep page workload reads page $deep_page"
  say "check $deep_name: $deep_path"

  # The costly search: the 16 most frequent filler words of the newest 100
  # messages of the first store filled; every store is then asked the same.
  if [ -z "${costly_words:-}" ]; then
    api GET "/api/messages?limit=100" -H "$auth"
    [ "$REPLY" = 200 ] || die "GET /api/messages?limit=100 answered $REPLY"
    costly_words=$(grep -o '"content":"[^"]*"' "$work/resp" | sed 's/^"content":"//; s/"$//' | tr ' ' '\n' |
      grep -vxE 'apple|river|zephyr|' | sort | uniq -c | sort -k1,1nr -k2 | awk 'NR <= 16 { print $2 }' | paste -sd+ -)
    [ -n "$costly_words" ] || die "no words for the costly search"
  fi
  costly_path="/api/messages?q=$costly_words"
  t0=${EPOCHREALTIME/./}
  api GET "$costly_path" -H "$auth"
  code=$REPLY
  ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
  items=$(grep -o '"id":' "$work/resp" | wc -l || true)
  json_field next
  say "$(printf 'check %-16s HTTP %s in %5d ms: %3d matches on a page of 20%s  %s' costly_16_words "$code" "$ms" "$items" "${REPLY:+ (more pages)}" "$costly_path")"

  st_base[$store_name]=$base st_auth[$store_name]=$auth st_tokens[$store_name]="${tokens[*]}"
  st_maxid[$store_name]=$maxid st_owner[$store_name]=$owner st_login[$store_name]=$have_login_user
  st_deep_name[$store_name]=$deep_name st_deep_path[$store_name]=$deep_path st_costly[$store_name]=$costly_path
}

# use_store STORE: make STORE's Herald the one the workloads and helpers use.
use_store() {
  store_name=$1
  herald_pid=${st_pid[$1]} sampler_pid=${st_sampler[$1]}
  base=${st_base[$1]} auth=${st_auth[$1]} maxid=${st_maxid[$1]} have_login_user=${st_login[$1]}
  read -ra tokens <<<"${st_tokens[$1]}"
  deep_name=${st_deep_name[$1]} deep_path=${st_deep_path[$1]} costly_path=${st_costly[$1]}
  search_path[owner_filter]="/api/messages?owner=${st_owner[$1]}"
}

# run_workload NAME CONNS: one run of workload NAME on the current store,
# into its results of CONNS connections. deep stands for the deep page,
# costly for list_beside_costly with costly_16_words.
run_workload() {
  local name=$1 conns=$2 results="$work/results-$store_name-$2"
  case $name in
  list_newest_20)
    bench_run "$name" "$conns" "$results" -s "$bench/report.lua" -H "$auth" "$base/api/messages?limit=20"
    ;;
  get_by_id)
    bench_run "$name" "$conns" "$results" -s "$bench/random_get.lua" -H "$auth" "$base" -- "$maxid" "$SEED"
    ;;
  search_common | search_two_words | search_rare | owner_filter)
    bench_run "$name" "$conns" "$results" -s "$bench/report.lua" -H "$auth" "$base${search_path[$name]}"
    ;;
  deep)
    bench_run "$deep_name" "$conns" "$results" -s "$bench/report.lua" -H "$auth" "$base$deep_path"
    ;;
  costly)
    costly_run "$conns" "$results"
    ;;
  create)
    bench_run create "$conns" "$results" -s "$bench/create.lua" "$base/api/messages" -- "$((SEED * 1000 + conns))" plain "$maxid" "${tokens[@]}"
    ;;
  create_mention5 | create_reply)
    bench_run "$name" "$conns" "$results" -s "$bench/create.lua" "$base/api/messages" -- "$((SEED * 1000 + conns))" "${name#create_}" "$maxid" "${tokens[@]}"
    ;;
  notifications)
    # user2 is named by every create_mention5 and answered by many
    # create_reply: a full account's first page, with its unread count.
    bench_run notifications "$conns" "$results" -s "$bench/report.lua" -H "Authorization: Bearer ${tokens[1]}" "$base/api/me/notifications?limit=20"
    ;;
  login)
    if [ -n "$have_login_user" ]; then
      bench_run login "$conns" "$results" -s "$bench/json_post.lua" "$base/api/login" -- "$login_body"
    fi
    ;;
  *) die "no workload $name" ;;
  esac
}

# each_store NAME CONNS FLIP: run workload NAME on every store, in STORES'
# order, or the other way round when FLIP is 1, so that neither store
# always runs first.
each_store() {
  local name=$1 conns=$2 flip=$3 i n
  local -a order
  read -ra order <<<"$STORES"
  n=${#order[@]}
  for ((i = 0; i < n; i++)); do
    use_store "${order[flip ? n - 1 - i : i]}"
    run_workload "$name" "$conns"
  done
}

# finish_store STORE: its memory, database and errors; stop its Herald.
finish_store() {
  local peak final_id db_size herald_status
  use_store "$1"
  mem_peak "$work/mem-$store_name"
  peak=$REPLY
  newest_id
  final_id=$REPLY
  db_mib
  db_size=$REPLY
  stop_pid "$sampler_pid" 1
  stop_pid "$herald_pid" 20
  herald_status=$REPLY
  st_pid[$store_name]='' st_sampler[$store_name]='' herald_pid='' sampler_pid=''
  say ""
  say "herald on $store_name, peak memory over its runs (sampled every 200 ms): $peak"
  say "database at the end: $final_id messages, $db_size MiB; herald stopped with exit status $herald_status$(grep -q 'stopped cleanly' "$work/herald-$store_name.log" && echo ' (stopped cleanly)')"
  if ((${st_errors[$store_name]:-0} > 0)); then
    say "herald logged ${st_errors[$store_name]} ERROR lines, for example:"
    while IFS= read -r line; do say "  ${line:0:300}"; done <"$work/errors-$store_name"
  fi
}

# db_mib: REPLY = the size of the store's database in MiB.
db_mib() {
  if [ "$store_name" = postgres ]; then
    pg_psql herald_bench "SELECT pg_database_size('herald_bench') / 1048576"
  else
    REPLY=$(($(stat -c %s "$work/herald.db") / 1048576))
  fi
}

# compare CONNS: the PostgreSQL figures of CONNS connections as ratios to
# bbolt's, with the targets: every read at least half of bbolt's, create a
# third. Both stores ran each workload one after the other, so each round
# gives a pair on the machine's pace of that moment: its ratio is the pair's
# req/s, and the table gives the median pair and the lowest and highest.
# The bolt and postgres columns are the median runs as ratios to the
# block's baseline, which both stores share; us b and us pg the CPU an
# answer cost, in µs (Herald's, and on PostgreSQL its server's too). On a
# machine the load keeps busy, the ratio is near (us b + w) / (us pg + w),
# w the load generator's CPU an answer.
compare() {
  local conns=$1 t
  t=$(awk -v conns="$conns" -v rounds="$ROUNDS" '
    function load(file, tag,    kv, f, line, k, i) {
      while ((getline line < file) > 0) {
        split(line, f, " ")
        if (!((tag, f[1]) in count)) names[tag, ++n[tag]] = f[1]
        k = ++count[tag, f[1]]
        if (f[2] == "FAILED") continue
        for (i = 2; i in f; i++) { split(f[i], kv, "="); v[tag, f[1], k, kv[1]] = kv[2] }
        if (v[tag, f[1], k, "herald_us"] != "") v[tag, f[1], k, "cpu_us"] = v[tag, f[1], k, "herald_us"] + v[tag, f[1], k, "db_us"]
      }
      close(file)
    }
    # sorted(a, m): sort a[1..m] ascending.
    function sorted(a, m,    i, j, tmp) {
      for (j = 2; j <= m; j++) {
        tmp = a[j]
        for (i = j - 1; i > 0 && a[i] > tmp; i--) a[i + 1] = a[i]
        a[i + 1] = tmp
      }
    }
    # mid(tag, w, field): the median of field (rps, p99_ms, cpu_us) over
    # the runs of w in tag that wrk finished (as the tables of each store take
    # them), those with no answer counting for req/s only; "-" when there
    # is none.
    function mid(tag, w, field,    k, m, a) {
      m = 0
      for (k = 1; k <= count[tag, w]; k++)
        if (v[tag, w, k, "rps"] != "" && (field == "rps" || v[tag, w, k, "requests"] > 0) && v[tag, w, k, field] != "")
          a[++m] = v[tag, w, k, field] + 0
      if (m == 0) return "-"
      sorted(a, m)
      return a[int((m + 1) / 2)]
    }
    BEGIN {
      load(ARGV[1], "l"); load(ARGV[2], "b"); load(ARGV[3], "p")
      nb = 0
      for (k = 0; k < 2; k++) {
        s = k ? "baseline_end" : "baseline_start"
        if (v["l", s, 1, "rps"] > 0) { base += v["l", s, 1, "rps"]; nb++ }
      }
      if (nb > 0) base /= nb
      printf "== postgres / bolt: %d connections, each workload run on both stores one after the other", conns
      if (rounds > 1) printf ", %d rounds", rounds
      printf " ==\n"
      printf "%-18s %10s %10s %9s %9s %9s %9s %8s %7s %7s %s\n", "workload", "bolt", "postgres", "pg/bolt", "lowest", "highest", "p99 b", "p99 pg", "us b", "us pg", "target"
      for (i = 1; i <= n["b"]; i++) {
        w = names["b", i]
        m = 0
        delete r
        for (k = 1; k <= count["b", w] && k <= count["p", w]; k++)
          if (v["b", w, k, "rps"] > 0 && v["p", w, k, "rps"] != "") r[++m] = v["p", w, k, "rps"] / v["b", w, k, "rps"]
        if (m == 0) continue
        sorted(r, m)
        ratio = r[int((m + 1) / 2)]
        target = "read >= 0.5"; want = 0.5
        if (w == "create") { target = "create >= 0.33"; want = 1 / 3 }
        if (w == "login" || w == "costly_16_words") { target = "-"; want = 0 }
        verdict = ""
        if (want > 0) {
          if (ratio < want) verdict = " NOT met"
          else if (r[1] >= want) verdict = (m > 1 ? " met in every round" : " met")
          else verdict = " met by the median, not in every round"
        }
        if (m < count["b", w]) verdict = verdict sprintf(" (%d of %d pairs)", m, count["b", w])
        printf "%-18s %10s %10s %9.3f %9.3f %9.3f %9s %8s %7s %7s %s%s\n", w,
          rel(mid("b", w, "rps")), rel(mid("p", w, "rps")), ratio, r[1], r[m],
          fmt("%.2f", mid("b", w, "p99_ms")), fmt("%.2f", mid("p", w, "p99_ms")),
          fmt("%.0f", mid("b", w, "cpu_us")), fmt("%.0f", mid("p", w, "cpu_us")), target, verdict
      }
    }
    # rel(x): x as a ratio to the baseline.
    function rel(x) { return x == "-" || base <= 0 ? "-" : sprintf("%.3f", x / base) }
    function fmt(f, x) { return x == "-" ? "-" : sprintf(f, x) }' "$work/results-baseline-$conns" "$work/results-bolt-$conns" "$work/results-postgres-$conns")
  say "$t"
}

# Every store is filled first, and its Herald runs on: then each workload
# runs on one store and right after on the other, ROUNDS times over,
# so that the stores' figures come from the same moments of the machine's
# pace rather than from two blocks minutes apart. Every connection count's
# reads come before any create or login, so every read sees the database
# as filled, and each store's as the other's; get_by_id draws from the
# filled range only. A count's baselines open its reads and close its
# creates and logins.
for store in $STORES; do
  prepare_store "$store"
done
if [ -n "${st_deep_name[bolt]:-}" ] && [ -n "${st_deep_name[postgres]:-}" ] &&
  [ "${st_deep_name[bolt]}" != "${st_deep_name[postgres]}" ]; then
  say "note: the deep page is ${st_deep_name[bolt]} on bolt and ${st_deep_name[postgres]} on postgres; the two are not compared"
fi
read -r first_store _ <<<"$STORES"
reads=(list_newest_20 get_by_id search_common search_two_words search_rare owner_filter deep costly)
for conns in $CONNS_LIST; do
  for store in $STORES; do : >"$work/results-$store-$conns"; done
  : >"$work/results-baseline-$conns"
  use_store "$first_store"
  bench_run baseline_start "$conns" "$work/results-baseline-$conns" -s "$bench/report.lua" "$baseline_url"
  for ((round = 1; round <= ROUNDS; round++)); do
    for i in "${!reads[@]}"; do
      each_store "${reads[i]}" "$conns" $(((i + round) % 2))
    done
  done
done
for conns in $CONNS_LIST; do
  for ((round = 1; round <= ROUNDS; round++)); do
    each_store create "$conns" $((round % 2))
    each_store create_mention5 "$conns" $(((round + 1) % 2))
    each_store create_reply "$conns" $((round % 2))
  done
  each_store notifications "$conns" 0
  each_store login "$conns" 0
  bench_run baseline_end "$conns" "$work/results-baseline-$conns" -s "$bench/report.lua" "$baseline_url"
done
for conns in $CONNS_LIST; do
  for store in $STORES; do
    use_store "$store"
    say ""
    table "$conns" "$work/results-baseline-$conns" "$work/results-$store-$conns"
  done
done
if [[ " $STORES " == *" bolt "* && " $STORES " == *" postgres "* ]]; then
  for conns in $CONNS_LIST; do
    say ""
    compare "$conns"
  done
fi
for store in $STORES; do
  finish_store "$store"
done

# Summary: other processes, the end.
other_pct "${run_acct[@]}"
other=$REPLY
pg_stop
say ""
say "other processes used $other% of a core during the run (from the start of the first fill to the last workload; PostgreSQL's server and the idle Herald count as ours)"
if above "$other" "$BUSY_WARN_PCT"; then
  say "WARNING: machine was busy: other processes used $other% of a core during the run; compare ratios, not absolute numbers, and see the other% column"
fi
say_end "$repo"
