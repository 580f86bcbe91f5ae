#!/usr/bin/env bash
# bench/floor/pgfloor.sh: the most this machine's PostgreSQL can answer, without
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
#   http_select_by_key
#                     wrk against bench/floor/pgbaseline: an HTTP server built
#                     like the baseline whose handler reads one row of
#                     pgbench's by primary key through a pgx pool and
#                     answers it as JSON, a round trip per request: the
#                     most a server reading PostgreSQL that way can serve
#   http_select_by_key_together
#                     the same with the reads of concurrent requests sent
#                     in one pipeline, as Herald's store sends its short
#                     reads (pg/readbatch.go)
#   http_page, http_page_together
#                     the same server's page: the 20 rows of highest key
#                     in one statement, answered as JSON, a round trip per
#                     request and then sent together
#   http_search_common, http_search_two_words, http_search_rare
#                     the same server's search, sent together, on a table
#                     of MESSAGES messages written with the words of
#                     bench/content.lua in the same shares ("apple" in
#                     30%, "river" in 20%, "zephyr" in one in 10,000,
#                     20-37 others from its 2,000), terms stored as
#                     Herald stores them: the 20 newest messages
#                     holding the words (and one more; Herald's page
#                     when none is asked for), in the plan that
#                     suits them, prepared once — for common words the
#                     walk down the primary key through the newest 2,048
#                     (Herald's first window), for a rare one the GIN
#                     postings; no token, no bounds row, no other windows:
#                     less than any search of Herald's does
#   herald_bolt_get_by_id, herald_bolt_list_newest_20,
#   herald_bolt_search_common, herald_bolt_search_two_words,
#   herald_bolt_search_rare
#                     wrk against Herald on bbolt, filled with MESSAGES
#                     messages through the API: bench/scale.sh's get_by_id,
#                     list_newest_20 and searches
# and prints each as requests or transactions/s and as a ratio to the
# baseline (measured at the start and again at the end; the ratios use the
# mean), then the HTTP floors as shares of Herald's figure on bbolt for
# the same kind of read: the most a read on PostgreSQL can reach of
# bbolt's on these cores, each way.
#
# Usage: bench/floor/pgfloor.sh           # about four minutes
# Environment: CONNS=64 DURATION=10 (seconds per run) MESSAGES=100000
# KEEP_WORK=1.
# Output: the report on stdout and in bench/out/pgfloor-YYYYmmdd-HHMMSS.txt.
# Only a Unix socket and 127.0.0.1 are used; everything is stopped by PID.
set -euo pipefail

bench=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
repo=$(cd "$bench/.." && pwd)
# shellcheck source=bench/lib.sh
. "$bench/lib.sh"
# shellcheck source=bench/pg.sh
. "$bench/pg.sh"

CONNS=${CONNS:-64}
DURATION=${DURATION:-10}
MESSAGES=${MESSAGES:-100000}
KEEP_WORK=${KEEP_WORK:-}
need_int CONNS "$CONNS" 1 1000
need_int DURATION "$DURATION" 1
need_int MESSAGES "$MESSAGES" 10000 # the rare word is in one message in 10,000

bench_setup pgfloor
pgbaseline_pid='' fill_pid=''
# set +e: under errexit the failing (exit) would end the trap before
# cleanup stops the servers it started.
trap 'status=$?; stop_pid "$pgbaseline_pid" 5; stop_pid "$fill_pid" 1; pg_stop; set +e; (exit "$status"); cleanup' EXIT
need_wrk log
pg_bin || die "PostgreSQL is not installed"
bin=$REPLY
[ -x "$bin/pgbench" ] || die "no pgbench in $bin"

say_start "PostgreSQL's floor on this machine"
go_build "$repo" ./bench/baseline "$work/baseline" bench/baseline
go_build "$repo" ./bench/floor/pgbaseline "$work/pgbaseline" bench/floor/pgbaseline
go_build "$repo" . "$work/herald" herald
pg_start "$work/pg"
pg_createdb floor
url=$REPLY
say "postgres: $("$bin/postgres" --version), fsync and synchronous_commit on, on a Unix socket; $CONNS clients, ${DURATION}s a run"

# wrk_rps NAME ARGS...: REPLY = requests/s of a wrk run of DURATION
# seconds with CONNS connections; dies on a failed run or on answers
# other than 2xx.
wrk_rps() {
  local name=$1
  shift
  wrk -t2 -c"$CONNS" -d"${DURATION}s" "$@" >"$work/$name.txt" 2>&1 || { cat "$work/$name.txt" >&2; die "wrk $name failed"; }
  ! grep -q 'Non-2xx' "$work/$name.txt" || { cat "$work/$name.txt" >&2; die "$name: answers other than 2xx"; }
  REPLY=$(awk '/^Requests\/sec:/ { printf "%d", $2 }' "$work/$name.txt")
  [ -n "$REPLY" ] && ((REPLY > 0)) || die "$name gave no figure"
}

"$work/baseline" -addr 127.0.0.1:0 2>"$work/baseline.log" &
baseline_pid=$!
listen_addr "$work/baseline.log" "$baseline_pid" baseline
baseline_url="http://$REPLY/healthz"
wrk_rps baseline_start "$baseline_url"
base_start=$REPLY

pgbench() { pg_as_owner "$bin/pgbench" "$@"; }
pgbench -i -q -s 10 "$url" >"$work/init.log" 2>&1 || { cat "$work/init.log" >&2; die "pgbench -i failed"; }
echo 'SELECT 1;' >"$work/select1.sql"
chmod 644 "$work/select1.sql"
printf '\\set aid random(1, 100000 * :scale)\nUPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;\n' >"$work/update.sql"
chmod 644 "$work/update.sql"

declare -A rate
for run in select_1 select_by_key update_one_row; do
  case $run in
    select_1) args=(-f "$work/select1.sql") ;;
    select_by_key) args=(-S) ;;
    update_one_row) args=(-f "$work/update.sql") ;;
  esac
  pgbench -n -M prepared -c "$CONNS" -j 2 -T "$DURATION" "${args[@]}" "$url" >"$work/$run.txt" 2>&1 ||
    { cat "$work/$run.txt" >&2; die "pgbench $run failed"; }
  rate[$run]=$(awk '/^tps = / { printf "%d", $3 }' "$work/$run.txt")
done

# One row by key, and a page, through HTTP, each way: the pgbench table
# has 100,000 rows a unit of scale.
for run in http_select_by_key http_select_by_key_together http_page http_page_together; do
  together=()
  [ "${run%_together}" = "$run" ] || together=(-together)
  "$work/pgbaseline" -addr 127.0.0.1:0 -db "$url" "${together[@]}" 2>"$work/$run.log" &
  pgbaseline_pid=$!
  listen_addr "$work/$run.log" "$pgbaseline_pid" pgbaseline
  case $run in
    http_select_by_key*) wrk_rps "$run" -s "$bench/random_get.lua" "http://$REPLY" -- 1000000 1 ;;
    http_page*) wrk_rps "$run" "http://$REPLY/api/messages" ;;
  esac
  rate[$run]=$REPLY
  stop_pid "$pgbaseline_pid" 5
  pgbaseline_pid=
done

# A search's floor: messages with content.lua's words in its shares (its
# 2,000 filler words, made the same way and drawn skewed to the first, as
# there), their terms distinct and sorted as Herald stores them (how soon
# a word is found in a message's terms is most of a walk's cost), under a
# GIN index, analysed. (i % 1 ties the words' subquery to its row, so it
# is drawn anew for every message, not once for all.)
log "writing $MESSAGES messages for the search's floor"
pg_psql floor "CREATE TABLE floor_messages (id bigint PRIMARY KEY, content text NOT NULL, terms text[] COLLATE \"C\");
INSERT INTO floor_messages (id, content, terms)
SELECT i, array_to_string(w, ' '), ARRAY(SELECT DISTINCT unnest(w) ORDER BY 1) FROM (
  SELECT i, ARRAY(SELECT s[k % 16 + 1] || s[k / 16 % 16 + 1] || s[k / 256 + 1]
                  FROM (SELECT floor(2000 * random() ^ 1.5)::int * 7919 % 4096 AS k,
                               '{ba,ko,mi,ru,te,sa,no,li,du,fe,ga,po,zi,ve,ha,jo}'::text[] AS s
                        FROM generate_series(1, 20 + i % 1 + floor(random() * 18)::int)) v)
    || CASE WHEN random() < 0.3 THEN '{apple}'::text[] ELSE '{}' END
    || CASE WHEN random() < 0.2 THEN '{river}'::text[] ELSE '{}' END
    || CASE WHEN i % 10000 = 4321 THEN '{zephyr}'::text[] ELSE '{}' END AS w
  FROM generate_series(1, $MESSAGES) i) s;
CREATE INDEX ON floor_messages USING gin (terms);"
pg_psql floor "VACUUM ANALYZE floor_messages"
pg_psql floor "SELECT count(*) FILTER (WHERE terms @> '{apple}'), count(*) FILTER (WHERE terms @> '{apple,river}'), count(*) FILTER (WHERE terms @> '{zephyr}') FROM floor_messages"
say "floor_messages: $MESSAGES messages; apple, apple and river, zephyr in $(echo "$REPLY" | tr '|' ' ' | awk '{ printf "%d, %d, %d", $1, $2, $3 }')"
walk_above=$((MESSAGES > 2048 ? MESSAGES - 2048 : 0))
declare -A search_q=([common]="q=apple&plan=walk&above=$walk_above" [two_words]="q=apple+river&plan=walk&above=$walk_above" [rare]="q=zephyr&plan=postings")
"$work/pgbaseline" -addr 127.0.0.1:0 -db "$url" -together 2>"$work/search.log" &
pgbaseline_pid=$!
listen_addr "$work/search.log" "$pgbaseline_pid" pgbaseline
search_url="http://$REPLY/api/search"
for kind in common two_words rare; do
  curl -fsS --max-time 10 -o "$work/search_$kind.json" "$search_url?${search_q[$kind]}" || die "the floor's $kind search failed"
  say "floor search $kind (${search_q[$kind]}): $(grep -o '"id":' "$work/search_$kind.json" | wc -l) messages"
  wrk_rps "http_search_$kind" "$search_url?${search_q[$kind]}"
  rate[http_search_$kind]=$REPLY
done
stop_pid "$pgbaseline_pid" 5
pgbaseline_pid=

# Herald on bbolt, filled through the API like bench/scale.sh's run.
HERALD_ADDR=127.0.0.1:0 HERALD_DB="$work/herald.db" HERALD_WRITES_PER_ACCOUNT=1000000000/1ms \
  "$work/herald" 2>>"$work/herald.log" &
herald_pid=$!
listen_addr "$work/herald.log" "$herald_pid" herald
herald_url="http://$REPLY"
token=$(curl -sS --max-time 60 -X POST "$herald_url/api/register" -H 'Content-Type: application/json' \
  -d '{"email":"floor@example.com","password":"floor bench password"}' | sed -n 's/.*"token":[[:space:]]*"\([^"]*\)".*/\1/p')
[ -n "$token" ] || die "registering on Herald failed"
log "filling Herald with $MESSAGES messages"
wrk -t2 -c"$CONNS" -d300s --timeout 10s -s "$bench/fill.lua" "$herald_url" -- "$MESSAGES" 2 1 "$token" >"$work/fill.txt" 2>&1 &
fill_pid=$!
# fill.lua idles once its quota is sent; stop it when the last message is in.
for ((i = 0; i < 3000; i++)); do
  newest=$(curl -sS --max-time 10 -H "Authorization: Bearer $token" "$herald_url/api/messages?limit=1" |
    grep -o '"id":[[:space:]]*[0-9]*' | head -n 1 | grep -o '[0-9]*$' || true)
  ((${newest:-0} >= MESSAGES)) && break
  kill -0 "$fill_pid" 2>/dev/null || die "the fill ended at ${newest:-0} of $MESSAGES messages; see $work/fill.txt"
  sleep 0.1
done
((${newest:-0} >= MESSAGES)) || die "the fill did not finish"
stop_pid "$fill_pid" 1
fill_pid=
wrk_rps herald_bolt_get_by_id -H "Authorization: Bearer $token" -s "$bench/random_get.lua" "$herald_url" -- "$MESSAGES" 1
rate[herald_bolt_get_by_id]=$REPLY
wrk_rps herald_bolt_list_newest_20 -H "Authorization: Bearer $token" "$herald_url/api/messages?limit=20"
rate[herald_bolt_list_newest_20]=$REPLY
declare -A herald_q=([common]="q=apple" [two_words]="q=apple+river" [rare]="q=zephyr")
for kind in common two_words rare; do
  wrk_rps "herald_bolt_search_$kind" -H "Authorization: Bearer $token" "$herald_url/api/messages?${herald_q[$kind]}"
  rate[herald_bolt_search_$kind]=$REPLY
done
stop_pid "$herald_pid" 20
herald_pid=''

wrk_rps baseline_end "$baseline_url"
base_end=$REPLY
stop_pid "$baseline_pid" 5
baseline_pid=''
base=$(((base_start + base_end) / 2))

say ""
say "$(printf '%-27s %12s %8s' run "per second" ratio)"
say "$(printf '%-27s %12d %8.3f' baseline "$base" 1) (start $base_start, end $base_end)"
for run in select_1 select_by_key update_one_row http_select_by_key http_select_by_key_together http_page http_page_together \
  http_search_common http_search_two_words http_search_rare \
  herald_bolt_get_by_id herald_bolt_list_newest_20 herald_bolt_search_common herald_bolt_search_two_words herald_bolt_search_rare; do
  say "$(printf '%-27s %12d %8.3f' "$run" "${rate[$run]}" "$(awk -v a="${rate[$run]}" -v b="$base" 'BEGIN { print a / b }')")"
done
say ""
share() { # FLOOR HERALD_RUN
  say "$1 / $2: $(awk -v a="${rate[$1]}" -v b="${rate[$2]}" 'BEGIN { printf "%.3f", a / b }')"
}
share http_select_by_key herald_bolt_get_by_id
share http_select_by_key_together herald_bolt_get_by_id
share http_page herald_bolt_list_newest_20
share http_page_together herald_bolt_list_newest_20
share http_search_common herald_bolt_search_common
share http_search_two_words herald_bolt_search_two_words
share http_search_rare herald_bolt_search_rare
say "A Herald read on PostgreSQL asks it at least once, besides its HTTP"
say "work: its share of bbolt's figure in bench/scale.sh stays below these."
say "report saved to ${report#"$repo"/}"
