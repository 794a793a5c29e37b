#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server on a loopback port, for the tests,
# and prints its URL. Installs the server from Debian's packages when the
# machine lacks it. Usage: tools/postgres/start.sh DIR [PORT]
# The server runs until `pg_ctl -D DIR/data stop` (or the machine stops).
# With a third argument `--durable`, commits are flushed to disk as in a
# production server (fsync on); otherwise durability is off, for speed.
# The server also accepts TLS, with a certificate for `localhost` (only:
# not for 127.0.0.1) that DIR/tls/ca.pem signed; DIR/tls/other-ca.pem is
# a CA that signed nothing. Plain connections stay allowed.
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

# A throwaway CA and the server's certificate (P-256, valid for 2 days).
tls="$dir/tls"
mkdir -p "$tls"
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
for ca in ca other-ca; do
  openssl req -x509 "${ec[@]}" -keyout "$tls/$ca.key" -out "$tls/$ca.pem" -days 2 \
    -subj "/CN=kesoku test $ca" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
done
openssl req "${ec[@]}" -keyout "$tls/server.key" -out "$tls/server.csr" -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n' >"$tls/server.ext"
openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial \
  -out "$tls/server.pem" -days 2 -extfile "$tls/server.ext" 2>/dev/null
chmod 600 "$tls/server.key"
[ ${#as[@]} -gt 0 ] && chown -R postgres "$tls"
chmod 755 "$tls"
chmod 644 "$tls"/*.pem
tls_options="-c ssl=on -c ssl_cert_file=$tls/server.pem -c ssl_key_file=$tls/server.key"
# Loopback only, room for several test processes' pools.
"${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -o \
  "-p $port -k $dir -c listen_addresses=127.0.0.1 $durability $tls_options -c max_connections=300" \
  start >/dev/null
echo "postgres://kesoku@127.0.0.1:$port/postgres"
