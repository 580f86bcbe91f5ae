# shellcheck shell=bash
# bench/pg.sh: a throwaway PostgreSQL server for the scripts that run
# Herald on PostgreSQL (bench/scale.sh with STORES="bolt postgres", and
# deploy/loopback.sh). Sourcing it only defines functions; nothing runs.
# It uses die and log from bench/lib.sh.
#
# The server runs Debian's (or any) PostgreSQL binaries as the postgres
# account when the script runs as root (initdb and postgres refuse root),
# keeps its data in a directory of the caller's, listens on a Unix socket
# there and on no TCP port, and keeps PostgreSQL's durable defaults
# (fsync and synchronous_commit on): its figures are comparable with a
# bbolt file that fsyncs every commit.
#
# Globals: pg_pid (the postmaster, '' when not running), pg_dir (its
# directory: data in $pg_dir/data, the socket in $pg_dir).

# pg_bin: REPLY = the directory holding initdb and postgres (PATH first,
# then Debian's /usr/lib/postgresql/VERSION/bin, newest first); false when
# there is none.
pg_bin() {
  local p d
  REPLY=''
  if p=$(command -v initdb 2>/dev/null); then
    p=$(readlink -f "$p")
    if [ -x "${p%/*}/postgres" ]; then
      REPLY=${p%/*}
      return 0
    fi
  fi
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4,4nr); do
    if [ -x "$d/postgres" ] && [ -x "$d/initdb" ]; then
      REPLY=$d
      return 0
    fi
  done
  return 1
}

# need_postgres ANNOUNCE: when PostgreSQL's server is missing, tell so with
# the function ANNOUNCE (log, warn) and install Debian's (as root or with
# sudo).
need_postgres() {
  pg_bin && return 0
  "$1" "installing PostgreSQL (Debian package postgresql)"
  local sudo=''
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >/dev/null
  pg_bin || die "PostgreSQL was installed, but no initdb and postgres were found"
}

# pg_as_owner CMD...: run CMD as the account that owns the cluster.
pg_as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# pg_start DIR [SETTING=VALUE...]: initialise a cluster in DIR (a new,
# empty directory; or one a pg_stop left, started again as it is) and
# start it on a socket in DIR with the settings given; sets pg_dir and
# pg_pid. Dies when it does not come up within 60 s.
pg_start() {
  local dir=$1 bin i
  shift
  pg_bin || die "PostgreSQL is not installed"
  bin=$REPLY
  pg_dir=$dir
  mkdir -p "$pg_dir"
  chmod 755 "$pg_dir"
  # The server's account must reach its directory through its parents.
  local up=${pg_dir%/*}
  while [ -n "$up" ] && [ "$up" != / ]; do
    if [ -z "$(find "$up" -maxdepth 0 -perm -o=x 2>/dev/null)" ]; then chmod o+x "$up" 2>/dev/null || true; fi
    up=${up%/*}
  done
  if [ "$(id -u)" = 0 ]; then chown postgres: "$pg_dir"; fi
  if [ ! -s "$pg_dir/data/PG_VERSION" ]; then
    pg_as_owner "$bin/initdb" -D "$pg_dir/data" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >"$pg_dir/initdb.log" 2>&1 ||
      { cat "$pg_dir/initdb.log" >&2; die "initdb failed"; }
  fi
  local opts=(-c "listen_addresses=" -c "unix_socket_directories=$pg_dir" -c "max_connections=200")
  local s
  for s in "$@"; do opts+=(-c "$s"); done
  pg_as_owner "$bin/postgres" -D "$pg_dir/data" "${opts[@]}" >"$pg_dir/server.log" 2>&1 &
  # The postmaster writes its own PID; runuser's is not the one to signal.
  pg_pid=''
  for ((i = 0; i < 600; i++)); do
    if [ -s "$pg_dir/data/postmaster.pid" ] && "$bin/pg_isready" -q -h "$pg_dir" -U postgres 2>/dev/null; then
      read -r pg_pid <"$pg_dir/data/postmaster.pid"
      return 0
    fi
    sleep 0.1
  done
  cat "$pg_dir/server.log" >&2
  die "PostgreSQL did not start within 60 s"
}

# pg_createdb NAME: create database NAME; REPLY = its URL on the socket.
pg_createdb() {
  pg_bin
  pg_as_owner "$REPLY/psql" -q -h "$pg_dir" -U postgres -d postgres -c "CREATE DATABASE $1" >/dev/null ||
    die "creating database $1 failed"
  REPLY="postgres:///$1?host=$pg_dir&user=postgres"
}

# pg_psql DB SQL: REPLY = the unaligned, tuples-only answer of SQL on DB.
pg_psql() {
  pg_bin
  REPLY=$(pg_as_owner "$REPLY/psql" -qAt -h "$pg_dir" -U postgres -d "$1" -c "$2")
}

# pg_stop: a fast shutdown of the server pg_start started (its connections
# are cut), waiting up to 30 s, then SIGKILL.
pg_stop() {
  local i
  [ -n "${pg_pid:-}" ] || return 0
  kill -INT "$pg_pid" 2>/dev/null || true
  for ((i = 0; i < 300; i++)); do
    kill -0 "$pg_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pg_pid" 2>/dev/null || true
  pg_pid=''
}

# pg_cpu: REPLY = CPU ticks the server has used: the postmaster's own, its
# children's that have ended (counted in its cutime and cstime) and those
# of the backends and workers running now.
pg_cpu() {
  local total=0 c
  [ -n "${pg_pid:-}" ] || { REPLY=0; return 0; }
  cpu_of "$pg_pid"
  total=$REPLY
  for c in $(cat "/proc/$pg_pid/task/$pg_pid/children" 2>/dev/null); do
    cpu_of "$c"
    total=$((total + REPLY))
  done
  REPLY=$total
}
