#!/usr/bin/env bash
# Load figures for Herald: builds the binary, runs it on 127.0.0.1 with a
# throwaway database, drives it with wrk, and reports each endpoint's
# throughput as a ratio to GET /healthz measured in the same run (this
# machine is shared and noisy; absolute numbers drift, ratios less so).
#
#   bench/load.sh                 # 10 s per scenario
#   DURATION=30s CONNS=32 bench/load.sh
#
# Traffic goes only to 127.0.0.1, and every wrk run is bounded by DURATION.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh

DURATION=${DURATION:-10s}
CONNS=${CONNS:-16}
THREADS=${THREADS:-2}

need_wrk warn

work=$(mktemp -d)
pid=''
trap 'stop_pid "$pid" 20; rm -rf "$work"' EXIT
go build -o "$work/herald" .
# Writes unlimited: the create workload posts from one account as fast as
# it can.
HERALD_ADDR=127.0.0.1:0 HERALD_DB="$work/herald.db" HERALD_WRITES_PER_ACCOUNT=1000000000/1ms "$work/herald" 2>"$work/log" &
pid=$!
wait_listen "$work/log" "$pid" 100 || { echo "herald did not start:" >&2; cat "$work/log" >&2; exit 1; }
base="http://$REPLY"

token=$(curl -sf "$base/api/register" -H 'Content-Type: application/json' \
  -d '{"email":"load@example.com","password":"load test password"}' |
  sed -n 's/.*"token":"\([^"]*\)".*/\1/p')
[ -n "$token" ] || { echo "register failed" >&2; exit 1; }
auth="Authorization: Bearer $token"
curl -sf "$base/api/messages" -H "$auth" -H 'Content-Type: application/json' \
  -d '{"content":"a rare needle among the load"}' >/dev/null

run() { # name, wrk script, then wrk arguments
  local name=$1 script=$2; shift 2
  local line
  line=$(wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" -s "$script" "$@" | grep '^RESULT')
  printf '%s %s\n' "$name" "${line#RESULT }"
}

results=$work/results
{
  run healthz bench/report.lua "$base/healthz"
  run create bench/post.lua -H "$auth" "$base/api/messages"
  run get_by_id bench/report.lua -H "$auth" "$base/api/messages/1"
  run me bench/report.lua -H "$auth" "$base/api/me"
  run search_first_page bench/report.lua -H "$auth" "$base/api/messages?limit=20"
  run search_rare_word bench/report.lua -H "$auth" "$base/api/messages?q=needle"
} | tee "$results"
awk '
  { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[$1, kv[1]] = kv[2] } names[++n] = $1 }
  END {
    base = v["healthz", "rps"]
    printf "\n%-20s %10s %8s %9s %9s %7s\n", "scenario", "req/s", "ratio", "p50 ms", "p99 ms", "non2xx"
    for (i = 1; i <= n; i++) { s = names[i]
      printf "%-20s %10.0f %8.3f %9s %9s %7s\n", s, v[s, "rps"], v[s, "rps"] / base, v[s, "p50_ms"], v[s, "p99_ms"], v[s, "non2xx"] }
  }' "$results"
