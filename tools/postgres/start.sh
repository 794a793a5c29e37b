#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server on a loopback port, for the tests,
# and prints its URL. Installs the server from Debian's packages when the
# machine lacks it. Usage: tools/postgres/start.sh DIR [PORT]
# The server runs until `pg_ctl -D DIR/data stop` (or the machine stops).
# With a third argument `--durable`, commits are flushed to disk as in a
# production server (fsync on); otherwise durability is off, for speed.
set -euo pipefail
dir=$(realpath -m "$1")
port=${2:-55432}
durability="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
[ "${3:-}" = "--durable" ] && durability="-c fsync=on -c synchronous_commit=on"

find_bin() {
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && { echo "$d"; return; }
  done
}
bin=$(find_bin || true)
if [ -z "$bin" ]; then
  echo "installing PostgreSQL from Debian's packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq >&2
  $sudo apt-get install -y -qq postgresql >&2
  bin=$(find_bin)
fi

# The server refuses to run as root: as root, run it as `postgres`.
as=()
if [ "$(id -u)" -eq 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
  as=(runuser -u postgres --)
fi

rm -rf "$dir"
mkdir -p "$dir"
[ ${#as[@]} -gt 0 ] && chown postgres "$dir"
"${as[@]}" "$bin/initdb" -D "$dir/data" -U kesoku --auth=trust -E UTF8 >/dev/null
# Loopback only, room for several test processes' pools.
"${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -o \
  "-p $port -k $dir -c listen_addresses=127.0.0.1 $durability -c max_connections=300" \
  start >/dev/null
echo "postgres://kesoku@127.0.0.1:$port/postgres"
