#!/usr/bin/env bash
# Installs Debian's PostgreSQL server (the database back-end of the tool plane, decision 0066) through
# apt-get, once: does nothing when a /usr/lib/postgresql/*/bin/postgres is there. The package's own
# cluster ("main") is not made: the back-end makes its own (oasis_operator/devcluster/backends/database.py).
# Called by tools/install-tools.sh (`make tools`, a prerequisite of `make test`) and `make postgres`
# (a prerequisite of `make demo`).
set -euo pipefail

log() { printf '[install-postgres] %s\n' "$*" >&2; }
die() { printf '[install-postgres] error: %s\n' "$*" >&2; exit 1; }

if ! compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null; then
  command -v apt-get >/dev/null 2>&1 || die "no PostgreSQL server and apt-get is not available; install Debian's 'postgresql' package."
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  # The package would make and start a cluster of the system ("main"); the back-end makes its own.
  $sudo mkdir -p /etc/postgresql-common/createcluster.d
  echo "create_main_cluster = false" | $sudo tee /etc/postgresql-common/createcluster.d/oasis-no-main.conf >/dev/null
  log "apt-get install postgresql (once) ..."
  t0=$(date +%s)
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends postgresql >&2
  log "postgresql installed in $(( $(date +%s) - t0 ))s"
fi

