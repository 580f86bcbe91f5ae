#!/usr/bin/env bash
# bench/instances.sh: Herald as more than one instance on one PostgreSQL
# database, measured. It starts a throwaway PostgreSQL server (bench/pg.sh,
# durable defaults: fsync and synchronous_commit on; installed from Debian
# when missing), INSTANCES Herald instances on it, and drives them with
# bench/streamload:
#
#   1. creates/s through all instances together (create-cost: COST_WRITERS
#      writers spread over the instances, COST_DURATION a phase, without
#      and then with SUBSCRIBERS streams open on the last instance);
#   2. delivery across instances: SUBSCRIBERS streams on the last
#      instance, RATE creates/s for DURATION through the first: the delay
#      from each create's 201 to its event on every stream, p50/p99/max,
#      and that every stream got every message once and in order;
#   3. the same delivery with streams and creates on one instance, for
#      comparison;
#   4. CPU profiles (--pprof) of the first instance under wrk: creates,
#      and a search with two words, the slowest request on PostgreSQL.
#
# Usage: bench/instances.sh                 # INSTANCES=2, a few minutes
#        SUBSCRIBERS=200 DURATION=5s bench/instances.sh
#
# Environment: INSTANCES=2 SUBSCRIBERS=1000 PER_ACCOUNT=16 RATE=200
# DURATION=10s WRITERS=8 COST_WRITERS=16 COST_DURATION=5s KEEP_WORK=1.
#
# Output: progress on stderr; the report on stdout and in
# bench/out/instances-YYYYmmdd-HHMMSS.txt, the profiles' top functions in
# it, the profiles beside it (instances-...-create.pprof and so on). Only
# 127.0.0.1 and a Unix socket are used; everything is stopped by PID.
set -euo pipefail

bench=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$bench/.." && pwd)
# shellcheck source=bench/lib.sh
. "$bench/lib.sh"
# shellcheck source=bench/pg.sh
. "$bench/pg.sh"

INSTANCES=${INSTANCES:-2}
SUBSCRIBERS=${SUBSCRIBERS:-1000}
PER_ACCOUNT=${PER_ACCOUNT:-16}
RATE=${RATE:-200}
DURATION=${DURATION:-10s}
WRITERS=${WRITERS:-8}
COST_WRITERS=${COST_WRITERS:-16}
COST_DURATION=${COST_DURATION:-5s}
KEEP_WORK=${KEEP_WORK:-}
need_int INSTANCES "$INSTANCES" 1 16
need_int SUBSCRIBERS "$SUBSCRIBERS" 1
need_int RATE "$RATE" 1
command -v go >/dev/null || die "go is required"
need_postgres log

bench_setup instances
herald_pids=()
# lib.sh's cleanup stops herald_pid and the samplers; the other instances
# and PostgreSQL are stopped here first.
# set +e: under errexit the failing (exit) would end the trap before
# cleanup stops the servers it started.
trap 'status=$?; for p in "${herald_pids[@]}"; do stop_pid "$p" 15; done; pg_stop; set +e; (exit "$status"); cleanup' EXIT

say_start "Herald on PostgreSQL, $INSTANCES instances"
fd_hard=$(ulimit -Hn)
[ "$fd_hard" = unlimited ] && fd_hard=1048576
ulimit -n "$fd_hard" 2>/dev/null || true
use_worktree "$repo"
say "settings: INSTANCES=$INSTANCES SUBSCRIBERS=$SUBSCRIBERS PER_ACCOUNT=$PER_ACCOUNT RATE=$RATE DURATION=$DURATION WRITERS=$WRITERS COST_WRITERS=$COST_WRITERS COST_DURATION=$COST_DURATION"
go_build "$repo" . "$work/herald" herald
go_build "$repo" ./bench/streamload "$work/streamload" bench/streamload

log "starting PostgreSQL (bench/pg.sh) in $work/pg"
pg_start "$work/pg"
pg_createdb herald
db_url=$REPLY
pg_bin
say "postgres: $("$REPLY/postgres" --version), fsync and synchronous_commit on, on a Unix socket"

max_streams=$((SUBSCRIBERS * 2))
bases=() metrics=()
for ((i = 1; i <= INSTANCES; i++)); do
  HERALD_ADDR=127.0.0.1:0 HERALD_DB="$db_url" HERALD_METRICS_ADDR=127.0.0.1:0 HERALD_PPROF=true \
    HERALD_REGISTRATIONS_PER_ADDRESS=1000000000/1ms HERALD_WRITES_PER_ACCOUNT=1000000000/1ms \
    HERALD_MAX_STREAMS="$max_streams" HERALD_MAX_STREAMS_PER_USER="$max_streams" \
    "$work/herald" 2>>"$work/herald-$i.log" &
  herald_pids+=("$!")
  # Not listen_addr: the metrics listener's line says "listening" too.
  a='' t=0
  while [ -z "$a" ] && ((t++ < 300)); do
    a=$(sed -n 's/.* msg=listening addr=\([0-9.:]*\).*/\1/p' "$work/herald-$i.log" | head -n 1)
    [ -n "$a" ] || sleep 0.1
  done
  [ -n "$a" ] || { cat "$work/herald-$i.log" >&2; die "herald $i did not report its address"; }
  bases+=("http://$a")
  m=$(sed -n 's/.*msg="metrics listening" addr=\([0-9.:]*\).*/\1/p' "$work/herald-$i.log" | head -n 1)
  metrics+=("$m")
  log "herald $i at http://$a (pid ${herald_pids[-1]}), metrics and pprof at $m"
done
first=${bases[0]} last=${bases[-1]}
all=$(IFS=,; echo "${bases[*]}")
acct_more() { pg_cpu; } # PostgreSQL's server is ours, not another process
acct_snapshot
run_acct=("${ACCT[@]}")

# run NAME [streamload flags]: run streamload, keep its RESULT line in
# result[NAME] and its log in the report.
declare -A result
run() {
  local name=$1 out="$work/streamload-$1.out"
  shift
  log "$name"
  if ! "$work/streamload" "$@" >"$out" 2>&1; then
    cat "$out" >&2
    die "streamload ($name) failed"
  fi
  while IFS= read -r line; do say "  $line"; done < <(grep -v '^RESULT ' "$out" | sed 's/^\[[0-9:]*\] //')
  result[$name]=$(grep '^RESULT ' "$out" | tail -n 1)
  say "  ${result[$name]}"
}

say ""
say "== 1. creates through all $INSTANCES instances together, without and with $SUBSCRIBERS streams on the last =="
run create-cost -base "$last" -write-base "$all" -mode create-cost -subscribers "$SUBSCRIBERS" -per-account "$PER_ACCOUNT" \
  -cost-writers "$COST_WRITERS" -cost-duration "$COST_DURATION" -cost-phases 0,S -herald-pid "${herald_pids[0]}"

say ""
say "== 2. delivery across instances: $SUBSCRIBERS streams on herald $INSTANCES, $RATE creates/s through herald 1 =="
run delivery-across -base "$last" -write-base "$first" -mode delivery -subscribers "$SUBSCRIBERS" -per-account "$PER_ACCOUNT" \
  -rate "$RATE" -duration "$DURATION" -writers "$WRITERS"

say ""
say "== 3. delivery on one instance: streams and creates on herald 1 =="
run delivery-one -base "$first" -mode delivery -subscribers "$SUBSCRIBERS" -per-account "$PER_ACCOUNT" \
  -rate "$RATE" -duration "$DURATION" -writers "$WRITERS"

# profile NAME WRK-ARGS...: wrk at 64 connections for 6 s on herald 1,
# and a 4 s CPU profile of herald 1 from the middle of it.
profile() {
  local name=$1 out="${report%.txt}-$1.pprof"
  shift
  wrk -t2 -c64 -d6s "$@" >"$work/wrk-$name.out" 2>&1 &
  local w=$!
  sleep 1
  curl -s -o "$out" "http://${metrics[0]}/debug/pprof/profile?seconds=4"
  wait "$w" || true
  say ""
  say "== profile of herald 1: $name, $(grep Requests/sec "$work/wrk-$name.out" | awk '{print $2}') req/s (wrk -c64) =="
  say "  go tool pprof -top $work/herald ${out#"$repo"/}"
  go tool pprof -top -nodecount=22 "$work/herald" "$out" 2>/dev/null | sed -n '5,$p' | sed 's/^/  /' |
    while IFS= read -r line; do say "$line"; done
}
need_wrk log
# The runs above filled the database; statistics as autovacuum would
# gather them in time, so the profiles show the steady state.
pg_psql herald "VACUUM ANALYZE"
token=$(curl -s "$first/api/register" -H 'Content-Type: application/json' \
  -d '{"email":"profile@example.com","password":"profile password"}' | sed -n 's/.*"token":"\([^"]*\)".*/\1/p')
[ -n "$token" ] || die "registering the profile account failed"
profile create -s "$bench/create.lua" "$first/api/messages" -- 1 "$token"
profile search_two_words -H "Authorization: Bearer $token" "$first/api/messages?q=apple+stone"

other_pct "${run_acct[@]}"
say ""
say "other processes used $REPLY% of a core during the run (PostgreSQL's server counts as ours)"
for ((i = 0; i < INSTANCES; i++)); do
  stop_pid "${herald_pids[$i]}" 15
  say "herald $((i + 1)) stopped with exit status $REPLY$(grep -q 'stopped cleanly' "$work/herald-$((i + 1)).log" && echo ' (stopped cleanly)')"
done
herald_pids=()
say_end "$repo"
