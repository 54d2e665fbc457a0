#!/usr/bin/env bash
# The release's artifacts, built into one directory (`make dist`; the release workflow,
# .github/workflows/release.yml, runs it and then only pushes what it built; decision 0108):
#   oasis_operator-<version>-py3-none-any.whl   the package, with everything it reads as package data
#   oasis-operator-<version>.tgz                 the Helm chart (`helm package`), pushed as an OCI artifact
#
# Usage: tools/release-build.sh OUT_DIR [wheel] [chart]      (default: both)
# Environment:
#   PYTHON        the interpreter that builds the wheel (default: .venv/bin/python); it needs the build
#                 back-end (setuptools >= 77, in the `test` extra): the build is offline, without isolation
#   HELM          the helm binary (default: the tool cache's, from `make tools`, else helm on PATH)
#   RELEASE_TAG   the Git tag being released (the workflow's github.ref_name): it must be v<version>
#
# Before building, the version must be the same in pyproject.toml, oasis_operator/__init__.py and the
# chart (version and appVersion, the image tag the chart runs): a release never ships a chart that pulls
# another version's image. Prints one line per artifact: its path and its sha256.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:?usage: tools/release-build.sh OUT_DIR [wheel] [chart]}"
shift
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(wheel chart)
python="${PYTHON:-$root/.venv/bin/python}"
chart="$root/charts/oasis-operator"

fail() { echo "release-build: $*" >&2; exit 1; }

version="$("$python" -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' "$root/pyproject.toml")"
package_version="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$root/oasis_operator/__init__.py")"
chart_version="$(sed -n 's/^version: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$chart/Chart.yaml")"
app_version="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$chart/Chart.yaml")"
for pair in "oasis_operator/__init__.py __version__:$package_version" \
  "charts/oasis-operator/Chart.yaml version:$chart_version" \
  "charts/oasis-operator/Chart.yaml appVersion:$app_version"; do
  [ "${pair##*:}" = "$version" ] ||
    fail "${pair%:*} is '${pair##*:}', but pyproject.toml's project.version is '$version'"
done
if [ -n "${RELEASE_TAG:-}" ] && [ "$RELEASE_TAG" != "v$version" ]; then
  fail "the tag $RELEASE_TAG is not v$version (pyproject.toml's project.version)"
fi

mkdir -p "$out"
out="$(cd "$out" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

for part in "${parts[@]}"; do
  case "$part" in
  wheel)
    # From a copy of what the wheel is made of: no build/ or egg-info left in the checkout, and no
    # stale file of an earlier build in the wheel.
    (cd "$root" && tar --exclude=__pycache__ --exclude='*.pyc' -cf - pyproject.toml README.md oasis_operator) |
      tar -xf - -C "$work"
    rm -f "$out"/oasis_operator-"$version"-*.whl
    "$python" -m pip wheel --quiet --no-deps --no-build-isolation --no-index --wheel-dir "$out" "$work" ||
      fail "building the wheel failed (PYTHON=$python needs setuptools>=77: make install)"
    ls "$out"/oasis_operator-"$version"-*.whl >/dev/null 2>&1 || fail "pip wrote no wheel of $version"
    ;;
  chart)
    helm="${HELM:-}"
    if [ -z "$helm" ]; then
      cache="${OASIS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/oasis-operator}"
      helm="$(ls -d "$cache"/tools/helm-*/helm 2>/dev/null | sort | tail -n 1 || true)"
      [ -n "$helm" ] || helm="$(command -v helm || true)"
    fi
    [ -n "$helm" ] && [ -x "$helm" ] || fail "no helm: set HELM, run make tools, or put helm on PATH"
    "$helm" lint --quiet "$chart" >/dev/null || fail "helm lint $chart failed"
    "$helm" package "$chart" --destination "$out" >/dev/null
    [ -f "$out/oasis-operator-$version.tgz" ] || fail "helm package wrote no oasis-operator-$version.tgz"
    ;;
  *) fail "unknown part '$part' (wheel, chart)" ;;
  esac
done

for f in "$out"/oasis_operator-"$version"-*.whl "$out/oasis-operator-$version.tgz"; do
  [ -f "$f" ] && echo "$f $(sha256sum "$f" | cut -d' ' -f1)"
done
exit 0
