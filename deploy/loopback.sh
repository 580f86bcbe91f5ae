#!/usr/bin/env bash
# deploy/loopback.sh: Herald as more than one machine, on one machine's
# loopback: a PostgreSQL server, INSTANCES Herald instances on it, and
# nginx in front of them, all from Debian's packages (installed when
# missing, as root or with sudo). Then it checks that they work as one
# service, through the balancer and around it:
#
#   - a bbolt file, written by a Herald that then stops, is moved into the
#     database with herald migrate, and through nginx its token works, its
#     messages are there and a stream of the file resumes after its last
#     event;
#   - register and post through nginx;
#   - herald admin create makes the first administrator on the database
#     while the instances run, and it administers through nginx;
#   - a live stream through nginx receives messages posted to each
#     instance directly, in order;
#   - one instance is killed (SIGKILL) and the service goes on: posts
#     through nginx succeed, and a stream resumes with Last-Event-ID on
#     whichever instance nginx picks, with nothing lost or repeated;
#   - PostgreSQL stops: nginx answers 503 with Retry-After, as the
#     instances do, and once it is back the service answers again.
#
# Usage:
#   deploy/loopback.sh              # start, check, stop everything
#   KEEP=1 deploy/loopback.sh       # start, check, then keep it all
#                                   # running until Ctrl-C
#   INSTANCES=3 deploy/loopback.sh  # more instances (default 2)
#
# Everything listens on 127.0.0.1 (Herald on ports the kernel picks,
# nginx on a free port found at start; PostgreSQL on a Unix socket only),
# lives in a temporary directory, and is stopped by PID on exit.
# docs/postgresql.md has the same steps for real machines.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=bench/lib.sh
. "$repo/bench/lib.sh"
# shellcheck source=bench/pg.sh
. "$repo/bench/pg.sh"

INSTANCES=${INSTANCES:-2}
KEEP=${KEEP:-}
need_int INSTANCES "$INSTANCES" 1 16

for tool in go curl; do
  command -v "$tool" >/dev/null || die "$tool is required"
done
need_postgres log
if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
  log "installing nginx (Debian package nginx)"
  sudo=''
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nginx >/dev/null
fi
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)

work=$(mktemp -d "${TMPDIR:-/tmp}/herald-deploy.XXXXXX")
chmod 755 "$work"
pids=() nginx_pid='' file_pid=''
cleanup() {
  local status=$? p
  trap - EXIT
  [ -z "$nginx_pid" ] || kill -QUIT "$nginx_pid" 2>/dev/null || true
  for p in "${pids[@]}" $file_pid; do
    stop_pid "$p" 15
  done
  pg_stop
  if ((status != 0)); then
    for f in "$work"/herald-*.log "$work/nginx/error.log"; do
      [ -s "$f" ] || continue
      echo "--- last lines of $f:" >&2
      tail -n 15 "$f" >&2
    done
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# 1. PostgreSQL, with a database for Herald.
log "starting PostgreSQL in $work/pg"
pg_start "$work/pg"
pg_createdb herald
db_url=$REPLY
log "database: $db_url"

go_build "$repo" . "$work/herald" herald
json() { sed -n "s/.*\"$1\":\"\\{0,1\\}\\([^\",}]*\\).*/\\1/p" | head -n 1; }
# created_ids: the message IDs of the message.created events of a stream
# on standard input, in order.
created_ids() { grep -A2 '^event: message.created' | sed -n 's/^data: {"id":\([0-9]*\).*/\1/p'; }
first_id() { # FILE: wait up to 10 s for a stream's first event id; REPLY = it, or empty
  local i; REPLY=''
  for ((i = 0; i < 100; i++)); do
    REPLY=$(grep -m 1 '^id:' "$1" 2>/dev/null | sed 's/^id: *//') || true
    [ -n "$REPLY" ] && return
    sleep 0.1
  done
}
post() { # BASE CONTENT: post as $auth and print the new message's id
  curl -fs "$1/api/messages" -H "$auth" -H 'Content-Type: application/json' -d "{\"content\": \"$2\"}" | json id
}

# 2. Moving from bbolt: a Herald on a file takes an account and two
#    messages, with a stream open between them, and stops; migrate copies
#    the file into the database.
HERALD_ADDR=127.0.0.1:0 HERALD_DB="$work/old.db" "$work/herald" >>"$work/herald-file.log" 2>&1 &
file_pid=$!
listen_addr "$work/herald-file.log" "$file_pid" "herald on a file"
F="http://$REPLY"
grace=$(curl -fs "$F/api/register" -H 'Content-Type: application/json' \
  -d '{"email": "grace@example.com", "password": "correct horse battery"}' | json token)
[ -n "$grace" ] || die "registering on the bbolt file failed"
auth="Authorization: Bearer $grace"
moved_first=$(post "$F" "written on bbolt")
curl -sN --max-time 10 "$F/api/messages/stream" -H "$auth" >"$work/file-stream" &
stream_pid=$!
first_id "$work/file-stream"
moved_from=$REPLY
[ -n "$moved_from" ] || die "the stream on the bbolt file sent no event id within 10 s"
moved_second=$(post "$F" "written on bbolt after the stream opened")
[ -n "$moved_first" ] && [ -n "$moved_second" ] ||
  die "posting on the bbolt file failed"
kill "$stream_pid" 2>/dev/null || true
wait "$stream_pid" 2>/dev/null || true
stop_pid "$file_pid" 20
file_pid=''
((REPLY == 0)) || die "herald on the bbolt file exited with status $REPLY on SIGTERM"
"$work/herald" migrate --db "$work/old.db" --to "$db_url" >"$work/migrate.out" 2>&1 ||
  { cat "$work/migrate.out" >&2; die "herald migrate failed"; }
grep -q 'every count agrees' "$work/migrate.out" ||
  { cat "$work/migrate.out" >&2; die "herald migrate did not say every count agrees"; }
log "migrated a bbolt file (messages $moved_first and $moved_second, a stream at $moved_from) into the database"

# 3. Herald instances on that database, each on a port the kernel picks.
addrs=()
start_instance() { # NAME: start an instance; REPLY = its address
  HERALD_ADDR=127.0.0.1:0 HERALD_DB="$db_url" HERALD_TRUSTED_PROXIES=127.0.0.1 \
    "$work/herald" >>"$work/herald-$1.log" 2>&1 &
  pids+=("$!")
  listen_addr "$work/herald-$1.log" "$!" "herald $1"
}
for ((i = 1; i <= INSTANCES; i++)); do
  start_instance "$i"
  addrs+=("$REPLY")
  log "herald $i at http://$REPLY (pid ${pids[-1]})"
done

# 4. nginx in front, on a free loopback port.
free_port() { # REPLY = a TCP port nothing on this machine listens on
  local used p
  used=$(ss -Htln 2>/dev/null | awk '{print $4}' | sed 's/.*://' | sort -u)
  for ((p = 20000 + RANDOM % 20000; ; p++)); do
    grep -qx "$p" <<<"$used" || break
  done
  REPLY=$p
}
free_port
lb="127.0.0.1:$REPLY"
mkdir -p "$work/nginx/tmp"
chmod 777 "$work/nginx/tmp"
servers=''
for a in "${addrs[@]}"; do servers+="        server $a max_fails=1 fail_timeout=10s;"$'\n'; done
sed -e "s|@WORK@|$work/nginx|g" -e "s|@LISTEN@|$lb|" -e "/@SERVERS@/{
r /dev/stdin
d
}" "$here/nginx.conf" <<<"${servers%$'\n'}" >"$work/nginx/nginx.conf"
"$nginx_bin" -t -q -p "$work/nginx" -c "$work/nginx/nginx.conf" -g 'daemon off;' ||
  die "nginx refused the configuration"
"$nginx_bin" -p "$work/nginx" -c "$work/nginx/nginx.conf" -g 'daemon off;' 2>>"$work/nginx/error.log" &
nginx_pid=$!
for ((i = 0; i < 100; i++)); do
  curl -fs -o /dev/null "http://$lb/healthz" && break
  kill -0 "$nginx_pid" 2>/dev/null || die "nginx exited; see its error log"
  sleep 0.1
done
log "nginx at http://$lb (pid $nginx_pid) in front of ${addrs[*]}"

# --- checks -----------------------------------------------------------------

B="http://$lb"

# What was moved from bbolt is served through nginx: the token from the
# file still works, the messages keep their IDs, and a stream opened on
# the file resumes on PostgreSQL after its last event.
got=$(curl -fs "$B/api/me" -H "$auth" | json email)
[ "$got" = "grace@example.com" ] || die "the token issued on the bbolt file does not work through nginx (got '$got')"
got=$(curl -fs "$B/api/messages/$moved_first" -H "$auth" | json content)
[ "$got" = "written on bbolt" ] || die "message $moved_first through nginx: content '$got', want 'written on bbolt'"
resumed=$(curl -sN --max-time 3 "$B/api/messages/stream" -H "$auth" -H "Last-Event-ID: $moved_from" |
  created_ids | paste -sd' ' -) || true
[ "$resumed" = "$moved_second" ] ||
  die "a stream of the bbolt file resumed after $moved_from through nginx gave ($resumed), want ($moved_second)"
log "the moved account's token, its messages and a stream of the file resume through nginx"

token=$(curl -fs "$B/api/register" -H 'Content-Type: application/json' \
  -d '{"email": "ada@example.com", "password": "correct horse battery"}' | json token)
[ -n "$token" ] || die "registering through nginx failed"
auth="Authorization: Bearer $token"
first=$(post "$B" "posted through nginx")
[ -n "$first" ] || die "posting through nginx failed"
log "registered and posted message $first through nginx"

# 5. The first administrator, made on the database while the instances run,
# administers through the balancer, whichever instance answers.
echo 'a long passphrase' | "$work/herald" admin create --db "$db_url" root@example.com >/dev/null ||
  die "herald admin create on PostgreSQL failed"
root=$(curl -fs "$B/api/login" -H 'Content-Type: application/json' \
  -d '{"username": "root@example.com", "password": "a long passphrase"}' | json token)
[ -n "$root" ] || die "the administrator's login through nginx failed"
for ((i = 0; i < 4; i++)); do
  curl -fs -o /dev/null "$B/api/admin/users" -H "Authorization: Bearer $root" ||
    die "the administrator's GET /api/admin/users through nginx failed"
done
log "herald admin create made an administrator, who lists accounts through nginx"

# A live stream through nginx, fed by posts to each instance directly.
curl -sN --max-time 30 "$B/api/messages/stream" -H "$auth" >"$work/stream" &
stream_pid=$!
first_id "$work/stream"
[ -n "$REPLY" ] || die "the stream through nginx sent no event id within 10 s"
want=()
for a in "${addrs[@]}"; do
  want+=("$(post "http://$a" "posted to $a directly")")
done
for ((i = 0; i < 100; i++)); do
  (($(grep -c '^event: message.created' "$work/stream" || true) >= ${#want[@]})) && break
  sleep 0.1
done
kill "$stream_pid" 2>/dev/null || true
wait "$stream_pid" 2>/dev/null || true
mapfile -t got < <(created_ids <"$work/stream")
[ "${got[*]}" = "${want[*]}" ] ||
  { cat "$work/stream" >&2; die "the stream through nginx got messages (${got[*]}), want (${want[*]}), one from each instance in order"; }
last=$(grep '^id:' "$work/stream" | tail -n 1 | sed 's/^id: *//')
log "a stream through nginx received the posts to every instance: ${got[*]} (last event id $last)"

# One instance dies; the service goes on.
if ((INSTANCES > 1)); then
  kill -KILL "${pids[0]}"
  wait "${pids[0]}" 2>/dev/null || true
  log "killed herald 1 (SIGKILL)"
  after=()
  for ((i = 0; i < 5; i++)); do
    id=$(post "$B" "after the kill $i")
    [ -n "$id" ] || die "posting through nginx after an instance died failed"
    after+=("$id")
  done
  resumed=$(curl -sN --max-time 3 "$B/api/messages/stream" -H "$auth" -H "Last-Event-ID: $last" |
    created_ids | paste -sd' ' -) || true
  [ "$resumed" = "${after[*]}" ] ||
    die "resuming after $last through nginx gave ($resumed), want (${after[*]})"
  log "posts through nginx go on, and a stream resumed after $last gets exactly (${after[*]})"
fi

# PostgreSQL out of reach: the instances answer 503, and so does nginx
# once it has marked them all failed, with Retry-After and a problem, not
# its own 502 page; PostgreSQL back, the service answers again within
# fail_timeout, with no instance restarted.
pg_stop
log "stopped PostgreSQL"
for ((i = 0; i < 4; i++)); do
  code=$(curl -s -o "$work/body" -D "$work/headers" -w '%{http_code}' "$B/api/messages" -H "$auth") || true
  [ "$code" = 503 ] || die "GET /api/messages through nginx with PostgreSQL stopped answered $code, want 503"
  grep -qix 'retry-after: 2'$'\r' "$work/headers" ||
    die "the 503 through nginx with PostgreSQL stopped has no Retry-After: 2"
  grep -qi '^content-type: application/problem+json' "$work/headers" ||
    die "the 503 through nginx with PostgreSQL stopped is not a problem: $(cat "$work/body")"
done
grep -q '"detail":"the service cannot answer now' "$work/body" ||
  die "nginx never marked the instances failed, so its own answer was not checked: $(cat "$work/body")"
pg_start "$work/pg"
log "started PostgreSQL again"
back=$SECONDS
for ((i = 0; i < 300; i++)); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "$B/api/messages" -H "$auth") || true
  [ "$code" = 200 ] && break
  sleep 0.1
done
[ "$code" = 200 ] || die "30 s after PostgreSQL came back, GET /api/messages through nginx still answers $code"
log "with PostgreSQL stopped, nginx answered 503 with Retry-After; $((SECONDS - back)) s after it came back, 200 again"

echo
echo "Herald on PostgreSQL, ${INSTANCES} instances behind nginx: it works."
echo "  balancer:  http://$lb"
for ((i = 0; i < INSTANCES; i++)); do
  if kill -0 "${pids[$i]}" 2>/dev/null; then state=running; else state="killed by the check"; fi
  echo "  herald $((i + 1)):  http://${addrs[$i]} ($state)"
done
echo "  database:  $db_url"
if [ -n "$KEEP" ]; then
  echo "Everything keeps running; Ctrl-C stops it all."
  wait "$nginx_pid"
fi
