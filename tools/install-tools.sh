#!/usr/bin/env bash
# Installs the shipping tools the test suite needs (tests/shipping/, tests/reports/), once:
#   helm         helm.sh/helm/v3/cmd/helm, `go install`ed at a pinned version   (helm lint, helm template)
#   kubeconform  github.com/yannh/kubeconform/cmd/kubeconform, pinned          (manifest validation)
#   chromium     Debian's package, through apt-get when /usr/bin/chromium is missing (HTML report screenshot)
#   postgresql   Debian's package, through tools/install-postgres.sh when no server is installed (the
#                database back-end of the tool plane, decision 0066); no cluster of the system is made
# Called by the Makefile's `tools` target (a prerequisite of `make test`). Does nothing when every tool
# is already present. Go binaries go to a versioned directory of the tool cache; the last line printed
# is that directory.
#
# Environment:
#   OASIS_CACHE_DIR   cache root (default: ${XDG_CACHE_HOME:-~/.cache}/oasis-operator)
set -euo pipefail

HELM_VERSION=v3.22.0
KUBECONFORM_VERSION=v0.8.0

cache_root="${OASIS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/oasis-operator}"
tools_dir="$cache_root/tools/helm-$HELM_VERSION-kubeconform-$KUBECONFORM_VERSION"

log() { printf '[install-tools] %s\n' "$*" >&2; }
die() { printf '[install-tools] error: %s\n' "$*" >&2; exit 1; }

# helm's release builds stamp its version and the Kubernetes version it assumes by default (the
# minor of the client-go it is built with, v0.37 for v3.22.0); `go install` alone leaves v1.20.
HELM_LDFLAGS="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  HELM_LDFLAGS+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=37"
done

go_install() {  # go_install BINARY PACKAGE@VERSION [LDFLAGS]
  [ -x "$tools_dir/$1" ] && return 0
  command -v go >/dev/null 2>&1 || die "the 'go' command was not found on PATH; Go 1.26 or newer is needed to build $1."
  log "go install $2 (once) ..."
  local t0; t0=$(date +%s)
  mkdir -p "$tools_dir"
  GOBIN="$tools_dir" CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -trimpath" go install -ldflags "-s -w ${3:-}" "$2"
  log "$1 built in $(( $(date +%s) - t0 ))s"
}

go_install helm "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" "$HELM_LDFLAGS"
go_install kubeconform "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION" "-X main.version=$KUBECONFORM_VERSION"

if [ ! -x /usr/bin/chromium ]; then
  command -v apt-get >/dev/null 2>&1 || die "/usr/bin/chromium is missing and apt-get is not available; install Debian's 'chromium' package."
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  # Another apt-get (an unattended upgrade, a second install) may hold the lock: wait for it.
  log "apt-get install chromium (once) ..."
  t0=$(date +%s)
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends chromium >&2
  log "chromium installed in $(( $(date +%s) - t0 ))s"
fi

bash "$(dirname "$0")/install-postgres.sh"

echo "$tools_dir"
