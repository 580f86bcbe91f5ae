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
LOGINS=${LOGINS:-640}
CONCURRENCY=${CONCURRENCY:-64}

work=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/herald" .
# Limits opened wide: this measures hashing memory, not the limiter.
"$work/herald" --addr 127.0.0.1:0 --db "$work/herald.db" \
  --login-failures-per-account 1000000000/1ms --login-failures-per-address 1000000000/1ms "$@" 2>"$work/log" &
pid=$!
addr=""
for _ in $(seq 100); do
  addr=$(sed -n 's/.*msg=listening addr=\([^ ]*\).*/\1/p' "$work/log")
  [ -n "$addr" ] && break
  sleep 0.1
done
[ -n "$addr" ] || { echo "herald did not start:" >&2; cat "$work/log" >&2; exit 1; }
body='{"username":"memory@example.com","password":"memory test password"}'
curl -sf "http://$addr/api/register" -H 'Content-Type: application/json' \
  -d '{"email":"memory@example.com","password":"memory test password"}' >/dev/null

( while kill -0 "$pid" 2>/dev/null; do
    awk '/^RssAnon/ {print $2}' "/proc/$pid/status" 2>/dev/null || true
    sleep 0.1
  done >"$work/samples" ) &
sampler=$!
seq "$LOGINS" | xargs -P "$CONCURRENCY" -I{} curl -s -o /dev/null -w '%{http_code}\n' \
  "http://$addr/api/login" -H 'Content-Type: application/json' -d "$body" | sort | uniq -c |
  awk '{printf "%6d answers with status %s\n", $1, $2}'
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
wait "$sampler" 2>/dev/null || true
peak=$(sort -n "$work/samples" | tail -n 1)
printf 'peak RssAnon: %d MiB (%d logins, %d at a time, herald flags: %s)\n' \
  "$((peak / 1024))" "$LOGINS" "$CONCURRENCY" "${*:-defaults}"
