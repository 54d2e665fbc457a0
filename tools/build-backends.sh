#!/usr/bin/env bash
# Builds the tool-plane back-ends (logs, metrics and alerts, traces, GitOps) from Go modules into a
# versioned cache directory beside the control-plane binaries, the same way tools/build-binaries.sh
# builds those. Nothing is built that is already there. The last line printed is the directory.
#
#   tools/build-backends.sh                 # every component
#   tools/build-backends.sh vmauth jaeger   # only these (and the CRDs, which cost nothing)
#   tools/build-backends.sh crds            # only the CRDs
#
# Components: victoria-metrics vmauth vmalert prom-label-proxy metrics-server jaeger
#             source-controller kustomize-controller git-server
# Besides binaries the directory holds crds/: kwok's ClusterLogs, ClusterResourceUsage and Metric
# CRDs (and, in crds/kwok/, its resource-metrics Metric object) and Flux's source and kustomize CRDs,
# copied from the same module versions, and the Gateway API's standard HTTPRoute CRD (the
# traffic-routing back-end, decision 0063). Choices: docs/decisions/0050-tool-plane-back-ends.md.
#
# Environment:
#   OASIS_CACHE_DIR   cache root (default: ${XDG_CACHE_HOME:-~/.cache}/oasis-operator)
#   OASIS_BUILD_JOBS  go build parallelism (default: 1; the machine is shared)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mods="$here/backends"
# shellcheck source=backends/versions.env
source "$mods/versions.env"

ALL=(victoria-metrics vmauth vmalert prom-label-proxy metrics-server jaeger
     source-controller kustomize-controller git-server)

log() { printf '[build-backends] %s\n' "$*" >&2; }
# Rough minutes per component on 2 cores with a cold Go cache: the ~25 minutes `make backends` takes
# there (issue 33), shared out by the size of what each builds; not measured one by one. Printed as
# the estimate of each step and of what is left (decision 0114).
declare -A MINUTES=([victoria-metrics]=4 [vmauth]=2 [vmalert]=3 [prom-label-proxy]=1 [metrics-server]=3
                    [jaeger]=5 [source-controller]=3 [kustomize-controller]=3 [git-server]=1)
die() { printf '[build-backends] error: %s\n' "$*" >&2; exit 1; }

# The directory is named by a digest of everything that pins a version, so a version change builds
# into a new directory and an old one is never mixed with it.
key="$(cat "$mods/versions.env" "$mods"/*/go.mod "$mods"/*/go.sum "$mods"/git-server/*.go \
       | sha256sum | cut -c1-12)"
cache_root="${OASIS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/oasis-operator}"
bin_dir="$cache_root/bin/backends-$key"
jobs="${OASIS_BUILD_JOBS:-1}"
# The Gateway API release whose standard HTTPRoute CRD is copied (a file, nothing built). Pinned here,
# not in versions.env: that file names the binaries' directory, and a CRD must not rebuild them; the
# CRD step's marker carries this version instead, so a change copies the CRDs again.
GATEWAY_API_VERSION=v1.6.3
crds_done="$bin_dir/crds/.complete-3-gateway-api-$GATEWAY_API_VERSION"

# "crds" alone asks for the CRDs only (no binary).
want=()
for a in "$@"; do [ "$a" = crds ] || want+=("$a"); done
[ $# -gt 0 ] || want=("${ALL[@]}")
for b in "${want[@]+"${want[@]}"}"; do
  [[ " ${ALL[*]} " == *" $b "* ]] || die "unknown component '$b' (known: crds ${ALL[*]})"
done
missing=()
for b in "${want[@]+"${want[@]}"}"; do [ -x "$bin_dir/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ] && [ -f "$crds_done" ]; then
  echo "$bin_dir"
  exit 0
fi

command -v go >/dev/null 2>&1 || die "the 'go' command was not found on PATH; install Go 1.26 or newer"
go_minor="$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')"
if [ -z "$go_minor" ] || [ "$go_minor" -lt 26 ] 2>/dev/null; then
  die "Go 1.26 or newer is required, found $(go env GOVERSION)"
fi

mkdir -p "$bin_dir"
tmp="$(mktemp -d "$bin_dir/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -trimpath -buildvcs=false"
ldflags="-s -w"

# Where a module version's files are (downloaded if needed).
module_dir() { go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'; }

# CRDs --------------------------------------------------------------------------------------------
if [ ! -f "$crds_done" ]; then
  mkdir -p "$tmp/crds"
  kwok_dir="$(module_dir "sigs.k8s.io/kwok@$KWOK_VERSION")"
  for k in clusterlogs clusterresourceusages metrics; do
    cp "$kwok_dir/kustomize/crd/bases/kwok.x-k8s.io_$k.yaml" "$tmp/crds/"
  done
  # kwok's kubelet resource-metrics endpoint (a Metric object), what metrics-server scrapes.
  mkdir -p "$tmp/crds/kwok"
  cp "$kwok_dir/kustomize/metrics/resource/metrics-resource.yaml" "$tmp/crds/kwok/"
  for c in source kustomize; do
    v="$(sed -n "s|^[[:space:]]*github.com/fluxcd/$c-controller \(v[^ ]*\).*|\1|p" "$mods/flux-$c-controller/go.mod")"
    [ -n "$v" ] || die "no github.com/fluxcd/$c-controller version in $mods/flux-$c-controller/go.mod"
    d="$(module_dir "github.com/fluxcd/$c-controller@$v")"
    cp "$d"/config/crd/bases/*.yaml "$tmp/crds/"
  done
  # Only HTTPRoute: it references Services of its own namespace, so no other Gateway API kind is needed.
  gw_dir="$(module_dir "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION")"
  cp "$gw_dir/config/crd/standard/gateway.networking.k8s.io_httproutes.yaml" "$tmp/crds/"
  chmod -R u+w "$tmp/crds"
  rm -rf "$bin_dir/crds"
  mv "$tmp/crds" "$bin_dir/crds"
  # .complete-2 is the marker of the CRD set before the Gateway API's (kept for trees that look for it).
  touch "$bin_dir/crds/.complete-2" "$crds_done"
fi

# Binaries ----------------------------------------------------------------------------------------
start=$(date +%s)
total=${#missing[@]}
left=0
for b in "${missing[@]+"${missing[@]}"}"; do left=$((left + ${MINUTES[$b]:-2})); done
[ "$total" -eq 0 ] || log "building $total back-end binaries (about $left min on 2 cores; once, then cached in $bin_dir)"
n=0
for b in "${missing[@]+"${missing[@]}"}"; do
  t0=$(date +%s)
  n=$((n + 1))
  log "[$n/$total] building $b (about ${MINUTES[$b]:-2} min; about $left min left; $(( (t0 - start) / 60 )) min elapsed) ..."
  left=$((left - ${MINUTES[$b]:-2}))
  case "$b" in
    victoria-metrics|vmauth|vmalert)
      GOBIN="$tmp" go install -p "$jobs" -ldflags "$ldflags" \
        "github.com/VictoriaMetrics/VictoriaMetrics/app/$b@$VICTORIAMETRICS_VERSION" ;;
    prom-label-proxy)
      GOBIN="$tmp" go install -p "$jobs" -ldflags "$ldflags" \
        "github.com/prometheus-community/prom-label-proxy@$PROM_LABEL_PROXY_VERSION" ;;
    metrics-server)
      GOBIN="$tmp" go install -p "$jobs" -ldflags "$ldflags" \
        "sigs.k8s.io/metrics-server/cmd/metrics-server@$METRICS_SERVER_VERSION" ;;
    jaeger)
      (cd "$mods/jaeger" && go build -p "$jobs" -ldflags "$ldflags" -o "$tmp/$b" \
        github.com/jaegertracing/jaeger/cmd/jaeger) ;;
    source-controller|kustomize-controller)
      (cd "$mods/flux-$b" && go build -p "$jobs" -ldflags "$ldflags" -o "$tmp/$b" "github.com/fluxcd/$b") ;;
    git-server)
      (cd "$mods/git-server" && go build -p "$jobs" -ldflags "$ldflags" -o "$tmp/$b" .) ;;
  esac
  mv "$tmp/$b" "$bin_dir/$b"
  log "[$n/$total] $b built in $(( $(date +%s) - t0 ))s ($(du -h "$bin_dir/$b" | cut -f1))"
done
[ "$total" -eq 0 ] || log "all $total back-end binaries built in $(( ($(date +%s) - start) / 60 )) min"
{
  echo "victoria-metrics vmauth vmalert $VICTORIAMETRICS_VERSION"
  echo "prom-label-proxy $PROM_LABEL_PROXY_VERSION"
  echo "metrics-server $METRICS_SERVER_VERSION"
  echo "kwok CRDs and Metric $KWOK_VERSION"
  echo "gateway-api HTTPRoute CRD $GATEWAY_API_VERSION"
  for pair in jaeger:github.com/jaegertracing/jaeger flux-source-controller:github.com/fluxcd/source-controller \
              flux-kustomize-controller:github.com/fluxcd/kustomize-controller git-server:github.com/fluxcd/gitkit; do
    d="${pair%%:*}" m="${pair#*:}"
    echo "$d: $(sed -nE "s|^[[:space:]]*(require )?$m (v[^ ]+).*|$m \2|p" "$mods/$d/go.mod")"
  done
} > "$bin_dir/VERSIONS"
[ ${#missing[@]} -eq 0 ] || log "built ${missing[*]} in $(( $(date +%s) - start ))s"
echo "$bin_dir"
