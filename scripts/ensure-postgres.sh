#!/usr/bin/env bash
# Make sure PostgreSQL's server binaries (initdb, pg_ctl) are present; the ledger plugin's tests
# start a throw-away server from them. Idempotent: installs Debian's `postgresql` package only
# when the binaries are missing (as root), then prints the folder that holds them.
set -euo pipefail

find_bindir() {
  local d
  # Debian keeps the server binaries under /usr/lib/postgresql/<version>/bin; take the newest.
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -V -r); do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; return 0; fi
  done
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(readlink -f "$(command -v initdb)")"; return 0
  fi
  return 1
}

if ! bindir="$(find_bindir)"; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "ensure-postgres: initdb/pg_ctl not found and not root; run as root or: apt-get install postgresql" >&2
    exit 1
  fi
  echo "ensure-postgres: installing Debian's postgresql package…" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq postgresql >/dev/null
  bindir="$(find_bindir)" || { echo "ensure-postgres: installed, but initdb/pg_ctl still not found" >&2; exit 1; }
fi
echo "$bindir"
