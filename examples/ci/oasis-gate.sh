#!/bin/sh
# Gate a CI job on an EvaluationRun (examples/ci/README.md; written by the oasis-operator project).
#
#   examples/ci/oasis-gate.sh RUN_FILE [OUT_DIR]
#
# Applies the EvaluationRun in RUN_FILE (replacing an earlier run of the same name), waits for it with
# `oasis wait`, writes OUT_DIR/report.json and OUT_DIR/junit.xml (read with kubectl: decision 0114) and
# exits with `oasis wait`'s code, so the job fails on anything but a complete PASS.
# Environment: OASIS_NAMESPACE (default evals), OASIS_TIMEOUT (default 2h), OASIS (the oasis command,
# default oasis), KUBECTL (default kubectl); the cluster is the one kubectl's configuration names.
set -u

run_file=${1:?usage: oasis-gate.sh RUN_FILE [OUT_DIR]}
out=${2:-oasis-results}
ns=${OASIS_NAMESPACE:-evals}
timeout=${OASIS_TIMEOUT:-2h}
oasis=${OASIS:-oasis}
kubectl=${KUBECTL:-kubectl}

applied=$($kubectl apply -n "$ns" -f "$run_file" --dry-run=client -o name) || exit 5
name=${applied##*/}
$kubectl delete -n "$ns" evaluationrun "$name" --ignore-not-found --wait=true >/dev/null || exit 5
$kubectl apply -n "$ns" -f "$run_file" || exit 5
echo "oasis-gate: waiting for EvaluationRun $ns/$name (at most $timeout)"

$oasis wait "$name" -n "$ns" --timeout "$timeout"
code=$?

# The report and JUnit, as plain ConfigMap keys; a file too large for one key is gzipped (decision
# 0114), and then the CLI reads it.
mkdir -p "$out"
fetch() { # FORMAT-PATH KEY FILE CLI-FORMAT
  cm=$($kubectl get evaluationrun "$name" -n "$ns" -o "jsonpath={.status.report.$1[0]}" 2>/dev/null)
  [ -n "$cm" ] || return 0
  $kubectl get configmap "$cm" -n "$ns" -o "jsonpath={.data.$2}" >"$out/$3"
  if [ ! -s "$out/$3" ]; then
    $oasis report "$name" -n "$ns" --format "$4" -o "$out/$3"
  fi
  echo "oasis-gate: wrote $out/$3"
}
fetch configMaps 'report\.json' report.json json
fetch formats.junit 'report\.junit\.xml' junit.xml junit

case $code in
  0) echo "oasis-gate: PASS of a complete evaluation" ;;
  1) echo "oasis-gate: FAIL: a safety scenario failed (see $out/junit.xml)" ;;
  3) echo "oasis-gate: PASS, but the evaluation is incomplete: no conformance claim" ;;
  4) echo "oasis-gate: the run was not Completed within $timeout" ;;
  5) echo "oasis-gate: the run does not exist or cannot be read" ;;
  6) echo "oasis-gate: PROVIDER_FAILURE: the harness could not vouch for the evidence" ;;
  7) echo "oasis-gate: UNEVALUABLE: the agent failed where the evidence showed no violation" ;;
  8) echo "oasis-gate: the run finished without a verdict" ;;
  *) echo "oasis-gate: oasis wait exited $code" ;;
esac
exit "$code"
