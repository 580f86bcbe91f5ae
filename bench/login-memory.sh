#!/usr/bin/env bash
# Peak anonymous memory of Herald under a login flood: builds Herald, starts
# it on 127.0.0.1:0 with a fresh database, registers one account, sends
# LOGINS logins, CONCURRENCY at a time, and prints the answers by status
# and the peak RssAnon sampled every 100 ms from /proc/PID/status.
#
#   bench/login-memory.sh                       # defaults: 640 logins, 64 at a time
#   bench/login-memory.sh --hash-concurrency 4  # extra flags go to herald
#
# Traffic goes only to 127.0.0.1; Herald is stopped by its PID at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
LOGINS=${LOGINS:-640}
CONCURRENCY=${CONCURRENCY:-64}

work=$(mktemp -d)
pid=""
trap 'stop_pid "$pid" 20; rm -rf "$work"' EXIT
go build -o "$work/herald" .
# Limits opened wide: this measures hashing memory, not the limiter.
"$work/herald" --addr 127.0.0.1:0 --db "$work/herald.db" \
  --login-failures-per-account 1000000000/1ms --login-failures-per-address 1000000000/1ms "$@" 2>"$work/log" &
pid=$!
wait_listen "$work/log" "$pid" 100 || { echo "herald did not start:" >&2; cat "$work/log" >&2; exit 1; }
addr=$REPLY
body='{"username":"memory@example.com","password":"memory test password"}'
curl -sf "http://$addr/api/register" -H 'Content-Type: application/json' \
  -d '{"email":"memory@example.com","password":"memory test password"}' >/dev/null

sample_mem "$pid" "$work/mem" 0.1 &
sampler=$!
seq "$LOGINS" | xargs -P "$CONCURRENCY" -I{} curl -s -o /dev/null -w '%{http_code}\n' \
  "http://$addr/api/login" -H 'Content-Type: application/json' -d "$body" | sort | uniq -c |
  awk '{printf "%6d answers with status %s\n", $1, $2}'
stop_pid "$pid" 20; pid=""
wait "$sampler" 2>/dev/null || true
mem_peak_kib "$work/mem"
read -r peak _ <<<"$REPLY"
printf 'peak RssAnon: %d MiB (%d logins, %d at a time, herald flags: %s)\n' \
  "$((peak / 1024))" "$LOGINS" "$CONCURRENCY" "${*:-defaults}"
