#!/usr/bin/env bash
# Builds the local Kubernetes control plane used by tests, `oasis dev-cluster` and the demo:
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (tools/k8s), etcd (tools/etcd) and kwok (go install of a
# released version). Output goes to a versioned cache outside the repository; nothing is built when
# the binaries are already there. The last line printed is the directory holding the binaries.
#
# Environment:
#   OASIS_CACHE_DIR   cache root (default: ${XDG_CACHE_HOME:-~/.cache}/oasis-operator)
#   OASIS_BUILD_JOBS  go build parallelism (default: number of cores)
set -euo pipefail

K8S_VERSION=v1.36.3   # keep in step with tools/k8s/go.mod
ETCD_VERSION=v3.6.8   # the etcd release k8s.io/kubernetes@$K8S_VERSION requires; tools/etcd/go.mod
KWOK_VERSION=v0.8.0   # newest kwok release whose go.mod accepts Go 1.26

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${OASIS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/oasis-operator}"
bin_dir="$cache_root/bin/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION"
jobs="${OASIS_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"

log() { printf '[build-binaries] %s\n' "$*" >&2; }
# Rough minutes per binary on 2 cores with a cold Go cache: the ~7 minutes the control plane takes
# there (issue 33), shared out by size; the first Kubernetes binary also compiles what the others
# share. Not measured one by one; printed as each step's estimate (decision 0114).
declare -A MINUTES=([kube-apiserver]=3 [kube-controller-manager]=1 [kube-scheduler]=1 [kubectl]=1
                    [etcd]=1 [kwok]=1)
die() { printf '[build-binaries] error: %s\n' "$*" >&2; exit 1; }

want=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok)
missing=()
for b in "${want[@]}"; do [ -x "$bin_dir/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ]; then
  echo "$bin_dir"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  die "the 'go' command was not found on PATH. Install Go 1.26 or newer (https://go.dev/doc/install) and run again (the binaries are built once, then cached in $bin_dir)."
fi
go_minor="$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')"
if [ -z "$go_minor" ] || [ "$go_minor" -lt 26 ] 2>/dev/null; then
  die "Go 1.26 or newer is required, found $(go env GOVERSION)."
fi

mkdir -p "$bin_dir"
tmp="$(mktemp -d "$bin_dir/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -trimpath -buildvcs=false"

minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
version_flags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  version_flags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  version_flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

start=$(date +%s)
total=${#missing[@]}
left=0
for b in "${missing[@]}"; do left=$((left + ${MINUTES[$b]:-1})); done
log "building $total control-plane binaries (about $left min on 2 cores; once, then cached in $bin_dir)"
n=0
for b in "${missing[@]}"; do
  t0=$(date +%s)
  n=$((n + 1))
  log "[$n/$total] $b: about ${MINUTES[$b]:-1} min; about $left min left; $(( (t0 - start) / 60 )) min elapsed"
  left=$((left - ${MINUTES[$b]:-1}))
  case "$b" in
    kube-apiserver|kube-controller-manager|kube-scheduler|kubectl)
      log "building $b $K8S_VERSION ..."
      (cd "$here/k8s" && go build -p "$jobs" -ldflags "$version_flags" -o "$tmp/$b" "k8s.io/kubernetes/cmd/$b")
      ;;
    etcd)
      log "building etcd $ETCD_VERSION ..."
      (cd "$here/etcd" && go build -p "$jobs" -ldflags "-s -w" -o "$tmp/etcd" .)
      ;;
    kwok)
      log "building kwok $KWOK_VERSION ..."
      GOBIN="$tmp" go install -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
      ;;
  esac
  mv "$tmp/$b" "$bin_dir/$b"
  log "[$n/$total] $b built in $(( $(date +%s) - t0 ))s"
done
log "all binaries ready in $(( $(date +%s) - start ))s"
echo "$bin_dir"
