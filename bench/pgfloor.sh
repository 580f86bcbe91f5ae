#!/usr/bin/env bash
# bench/pgfloor.sh: the most this machine's PostgreSQL can answer, without
# Herald, as a ratio to the HTTP baseline bench/scale.sh divides by. It
# says what a Herald on PostgreSQL can reach at best: every request of
# Herald's on PostgreSQL costs at least one statement like these, on the
# same cores, besides its HTTP work, so no workload can go faster than the
# floor of its statement.
#
# It starts a throwaway PostgreSQL (bench/pg.sh; durable defaults) and the
# baseline server (bench/baseline), then measures, one after the other on
# the same machine:
#   baseline          wrk against bench/baseline (as in bench/scale.sh)
#   select_1          pgbench: SELECT 1, prepared, CONNS clients: a round
#                     trip and nothing else
#   select_by_key     pgbench -S: one row by primary key, prepared, on
#                     pgbench's tables (scale 10): get_by_id's statement
#   update_one_row    pgbench: one UPDATE of a random row per transaction,
#                     each committed (fsync'd): the least a durable write
#                     costs
# and prints each as transactions/s and as a ratio to the baseline.
#
# Usage: bench/pgfloor.sh                 # about a minute
# Environment: CONNS=64 DURATION=10 (seconds per pgbench run) KEEP_WORK=1.
# Output: the report on stdout and in bench/out/pgfloor-YYYYmmdd-HHMMSS.txt.
# Only a Unix socket and 127.0.0.1 are used; everything is stopped by PID.
set -euo pipefail

bench=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$bench/.." && pwd)
# shellcheck source=bench/lib.sh
. "$bench/lib.sh"
# shellcheck source=bench/pg.sh
. "$bench/pg.sh"

CONNS=${CONNS:-64}
DURATION=${DURATION:-10}
KEEP_WORK=${KEEP_WORK:-}
need_int CONNS "$CONNS" 1 1000
need_int DURATION "$DURATION" 1

bench_setup pgfloor
trap 'status=$?; pg_stop; (exit "$status"); cleanup' EXIT
need_wrk log
pg_bin || die "PostgreSQL is not installed"
bin=$REPLY
[ -x "$bin/pgbench" ] || die "no pgbench in $bin"

say_start "PostgreSQL's floor on this machine"
go_build "$repo" ./bench/baseline "$work/baseline" bench/baseline
pg_start "$work/pg"
pg_createdb floor
url=$REPLY
say "postgres: $("$bin/postgres" --version), fsync and synchronous_commit on, on a Unix socket; $CONNS clients, ${DURATION}s a run"

"$work/baseline" -addr 127.0.0.1:0 2>"$work/baseline.log" &
baseline_pid=$!
listen_addr "$work/baseline.log" "$baseline_pid" baseline
baseline_url="http://$REPLY/healthz"
wrk -t2 -c"$CONNS" -d5s "$baseline_url" >"$work/wrk.txt"
base=$(awk '/^Requests\/sec:/ { printf "%d", $2 }' "$work/wrk.txt")
[ -n "$base" ] && ((base > 0)) || die "the baseline gave no figure"
stop_pid "$baseline_pid" 5
baseline_pid=''

pgbench() { pg_as_owner "$bin/pgbench" "$@"; }
pgbench -i -q -s 10 "$url" >"$work/init.log" 2>&1 || { cat "$work/init.log" >&2; die "pgbench -i failed"; }
echo 'SELECT 1;' >"$work/select1.sql"
chmod 644 "$work/select1.sql"
printf '\\set aid random(1, 100000 * :scale)\nUPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;\n' >"$work/update.sql"
chmod 644 "$work/update.sql"

say ""
say "$(printf '%-16s %12s %8s' run "per second" ratio)"
say "$(printf '%-16s %12d %8.3f' baseline "$base" 1)"
for run in select_1 select_by_key update_one_row; do
  case $run in
    select_1) args=(-f "$work/select1.sql") ;;
    select_by_key) args=(-S) ;;
    update_one_row) args=(-f "$work/update.sql") ;;
  esac
  pgbench -n -M prepared -c "$CONNS" -j 2 -T "$DURATION" "${args[@]}" "$url" >"$work/$run.txt" 2>&1 ||
    { cat "$work/$run.txt" >&2; die "pgbench $run failed"; }
  tps=$(awk '/^tps = / { printf "%d", $3 }' "$work/$run.txt")
  say "$(printf '%-16s %12d %8.3f' "$run" "$tps" "$(awk -v a="$tps" -v b="$base" 'BEGIN { print a / b }')")"
done
say ""
say "A Herald request on PostgreSQL costs one such statement at the least,"
say "besides its HTTP work: its ratio in bench/scale.sh stays below these."
say "report saved to ${report#"$repo"/}"
