#!/usr/bin/env bash
# What the tests need from the machine, provisioned when missing: run first by `npm test` and by
# `.ci/run`. Each check costs a few milliseconds, so a machine that has everything passes through
# in well under a second and prints nothing.
#
#   MariaDB at 127.0.0.1:3306 (unless TEST_STORES leaves out mysql or TEST_MYSQL_URL names another
#     server): Debian's mariadb-server installed if absent, started if installed but not running,
#     root let in over TCP with the empty password, database `test` created;
#   Chromium at CHROMIUM_PATH (default /usr/bin/chromium): the browser tests;
#   jq: the docs' examples (test/docs-examples.test.ts);
#   Python's grpc and google.protobuf for GRPCIO_PYTHON (default /usr/bin/python3): the grpcio test.
#   promtool (Debian's prometheus): test/api/ops-metrics-lint.test.ts checks /metrics with it.
#   protoc and grpc_python_plugin at /usr/bin: the Python how-to's test (test/clients/python-howto.test.ts).
#   pdftotext, pdfinfo and pdftoppm on PATH (Debian's poppler-utils): the PDF tests read invoices'
#     PDFs with them (test/api/invoice-pdf.test.ts), and `npm run screenshots` renders one to PNG.
#   Redis at 127.0.0.1:6379 (unless TEST_REDIS_URL names another server): the shared rate limits'
#     test (test/api/ratelimit-shared.test.ts); Debian's redis-server installed if absent, started
#     (without persistence) if installed but not running.
#
# Packages come from Debian's apt, and only when this runs as root on a machine with apt-get.
# Otherwise nothing is installed and test/preflight.ts, run next, says in its first line what is
# missing and the one command that installs it. A new prerequisite is one more `need` line below.
#
# PROVISION_ROOT_FS (tests only) prefixes the fixed paths this script looks at, so
# test/provision.test.ts can fake a machine that lacks each prerequisite in turn.
set -uo pipefail

root_fs="${PROVISION_ROOT_FS:-}"
stores="${TEST_STORES:-mysql,sqlite}"
chromium="${CHROMIUM_PATH:-$root_fs/usr/bin/chromium}"
python="${GRPCIO_PYTHON:-$root_fs/usr/bin/python3}"

say() { echo "test prerequisites: $*"; }

can_apt() { [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; }

apt_updated=""
apt_install() {
  if [ -z "$apt_updated" ]; then
    say "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || return 1
    apt_updated=1
  fi
  say "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

missing=()
mariadb_missing=""
# need PACKAGE CHECK...: installs PACKAGE (several, space-separated) when CHECK fails; without
# root or apt the package is only noted for the closing line.
need() {
  local packages="$1"
  shift
  "$@" >/dev/null 2>&1 && return 0
  if can_apt; then
    # shellcheck disable=SC2086
    apt_install $packages || {
      say "apt-get install $packages failed"
      exit 1
    }
  else
    missing+=("$packages")
  fi
}

# MariaDB: only for the mysql half, and only the default server (TEST_MYSQL_URL is someone's own).
mariadb_tcp() { mysql -uroot -h127.0.0.1 --protocol=TCP -e "SELECT 1" >/dev/null 2>&1; }
if [[ ",$stores," == *",mysql,"* ]] && [ -z "${TEST_MYSQL_URL:-}" ] && ! mariadb_tcp; then
  if can_apt; then
    if [ ! -x "$root_fs/usr/sbin/mariadbd" ]; then
      apt_install mariadb-server || {
        say "apt-get install mariadb-server failed"
        exit 1
      }
    fi
    if ! mysqladmin -uroot ping >/dev/null 2>&1; then
      say "starting MariaDB"
      service mariadb start >/dev/null 2>&1 || start-stop-daemon --start --oknodo --background --exec "$root_fs/usr/sbin/mariadbd" >/dev/null 2>&1
      for _ in $(seq 1 60); do
        mysqladmin -uroot ping >/dev/null 2>&1 && break
        sleep 0.5
      done
    fi
    if ! mariadb_tcp; then
      # Debian's root logs in over the Unix socket only; let it in over TCP with the empty password too.
      say "letting MariaDB's root log in over TCP with the empty password"
      mysql -uroot -e "ALTER USER root@localhost IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket;" >/dev/null 2>&1 || {
        say "could not let root in over TCP (mysql -uroot over the socket failed)"
        exit 1
      }
    fi
    mysql -uroot -h127.0.0.1 --protocol=TCP -e "CREATE DATABASE IF NOT EXISTS test" >/dev/null 2>&1 || {
      say "MariaDB does not answer on 127.0.0.1:3306"
      exit 1
    }
  else
    mariadb_missing=1
  fi
fi

[ -n "${CHROMIUM_PATH:-}" ] || need chromium test -x "$chromium"
need jq command -v jq
[ -n "${GRPCIO_PYTHON:-}" ] || need "python3-grpcio python3-protobuf" "$python" -c "import grpc, google.protobuf"
# Node 24 for the second pass (`npm run test:node24`, .ci/run step 7), only when asked: the npm
# registry's `node` package and better-sqlite3 built for it, in .node24/ (scripts/node24.sh).
if [ -n "${TEST_NODE24:-}" ]; then
  bash "$(dirname "$0")/node24.sh" provision || {
    say "Node 24 could not be provisioned (scripts/node24.sh provision)"
    exit 1
  }
fi
need "protobuf-compiler protobuf-compiler-grpc" test -x "$root_fs/usr/bin/protoc" -a -x "$root_fs/usr/bin/grpc_python_plugin"
need prometheus test -x "$root_fs/usr/bin/promtool"
need "openssl curl" test -x "$root_fs/usr/bin/openssl" -a -x "$root_fs/usr/bin/curl"
need poppler-utils type -P pdftotext pdfinfo pdftoppm

# Redis: only the default server (TEST_REDIS_URL is someone's own), started as the machine starts it.
redis_missing=""
redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }
redis_start="redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save \"\" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log"
if [ -z "${TEST_REDIS_URL:-}" ] && ! redis_up; then
  if can_apt; then
    if [ ! -x "$root_fs/usr/bin/redis-server" ]; then
      apt_install redis-server || {
        say "apt-get install redis-server failed"
        exit 1
      }
    fi
    if ! redis_up; then
      say "starting Redis"
      mkdir -p "$root_fs/var/lib/redis" "$root_fs/var/log/redis"
      "$root_fs/usr/bin/redis-server" --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir "$root_fs/var/lib/redis" --logfile "$root_fs/var/log/redis/ci.log" >/dev/null 2>&1
      for _ in $(seq 1 40); do
        redis_up && break
        sleep 0.25
      done
    fi
    redis_up || {
      say "Redis does not answer on 127.0.0.1:6379"
      exit 1
    }
  else
    redis_missing=1
  fi
fi

if [ "${#missing[@]}" -gt 0 ] || [ -n "$mariadb_missing" ] || [ -n "$redis_missing" ]; then
  # Not root or no apt: one line with the command, then test/preflight.ts says what each is for.
  cmd=""
  [ -n "$mariadb_missing" ] && missing=("mariadb-server" "${missing[@]}")
  [ -n "$redis_missing" ] && missing+=("redis-server")
  cmd="apt-get install -y ${missing[*]}"
  [ -n "$mariadb_missing" ] && cmd="$cmd && service mariadb start && mysql -uroot -e \"ALTER USER root@localhost IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket\""
  [ -n "$redis_missing" ] && cmd="$cmd && $redis_start"
  say "missing; as root run: $cmd (or TEST_STORES=sqlite npm test without MariaDB)"
fi
exit 0
