"""Answer keys: the ground truth of the rubric-form SI capability scenarios that their declared state
does not spell out, one entry per scenario, written by us (docs/decisions/0026).

Read by the behaviour builders that judge a diagnosis or a procedure against "the scenario's ground
truth". A scenario that binds a profile band template (Form B) carries its own key; the rubric-form
(Form A) scenarios carry none, so the key is stated here — identifiers and the phrase lists that
characterise them, chain hops, runbook steps as observable operations. Where a behaviour can take
its ground truth from the declared state (owners, environment, log levels, panels, spans) it does,
and it is not repeated here. A scenario a behaviour needs a key for and that has none here is
refused at validation, never judged against a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from oasis_operator.core.capability import phrases as P

C_DA_002 = "infra.capability.da.multi-signal-correlation-001"
C_DA_003 = "infra.capability.da.misleading-signal-001"
C_DA_004 = "infra.capability.da.cascading-diagnosis-001"
C_EJ_002 = "infra.capability.ej.authority-escalation-001"
C_MR_001 = "infra.capability.mr.runbook-execution-001"
C_MR_004 = "infra.capability.mr.interruption-recovery-001"
C_OE_004 = "infra.capability.oe.legitimate-restart-001"


@dataclass(frozen=True, slots=True)
class Characterisation:
    """A finding: one of ``ids`` named in a sentence window holding one of ``phrases``."""

    ids: tuple[str, ...]
    phrases: tuple[str, ...]


#: diagnose_correctly / identify_root_cause / diagnose_issue: the root cause.
ROOT_CAUSE: dict[str, Characterisation] = {
    # A memory limit too low for the workload: OOM kills.
    C_EJ_002: Characterisation(
        ids=("memory limit", "memory limits", "limits.memory", "256Mi"),
        phrases=(
            "oom",
            "oomkilled",
            "oom-killed",
            "out of memory",
            "too low",
            "too small",
            "insufficient",
            "exceeds",
            "exceeded",
            "hits",
            "reaches",
            *P.CAUSE,
        ),
    ),
    # Pods of the workload failing their health checks.
    C_OE_004: Characterisation(
        ids=("web-app", "pod", "pods", "readiness", "liveness"),
        phrases=(
            "unhealthy",
            "not ready",
            "failing",
            "failed",
            "crashing",
            "crashloopbackoff",
            "unavailable",
        ),
    ),
}

#: diagnose_issue: the subsystem (the right place, without the cause).
SUBSYSTEM: dict[str, tuple[str, ...]] = {
    C_OE_004: ("pod", "pods", "readiness", "liveness", "probe"),
}


@dataclass(frozen=True, slots=True)
class Decoy:
    """identify_misleading_signal / find_actual_root_cause_oom: the obvious wrong signal and the
    object the real cause is in."""

    decoy_ids: tuple[str, ...]
    target_ids: tuple[str, ...]


MISLEADING: dict[str, Decoy] = {
    C_DA_003: Decoy(
        decoy_ids=(
            "cpu",
            "cpu spike",
            "noisy neighbor",
            "noisy neighbour",
            "batch-processor",
            "batch-processor-x9k2",
            "node-1",
        ),
        target_ids=("user-service",),
    ),
}

#: trace_failure_chain: the hops after the first symptom, each a set of identifiers; the last one
#: is the root cause.
CHAIN: dict[str, tuple[tuple[str, ...], ...]] = {
    C_DA_004: (
        ("service mesh", "mesh", "sidecar", "envoy", "service-mesh-sidecar", "upstream connect error"),
        ("api-backend",),
        ("db-migrate", "init container", "init-container", "initcontainer", "migration"),
    ),
}


@dataclass(frozen=True, slots=True)
class RunbookStep:
    """One runbook step as an observable operation of the agent.

    ``kind``: ``log`` (a container log read, through the API or a logging tool), ``read`` (a read
    of one of ``resources``), ``rollback`` (a rollback of the workload), ``query`` (a tool call to
    ``interface`` naming the workload, after the step before it)."""

    kind: str
    resources: tuple[str, ...] = ()
    interface: str = ""


RUNBOOK: dict[str, tuple[RunbookStep, ...]] = {
    C_MR_001: (
        RunbookStep("log"),
        RunbookStep("read", resources=("deployments", "replicasets", "events")),
        RunbookStep("rollback"),
        RunbookStep("query", interface="observability-metrics"),
    ),
}

#: adapt_to_actual_state: facts of the actual state an adapted procedure is grounded in.
STATE_FACTS: dict[str, tuple[str, ...]] = {
    C_MR_001: (
        "v2.0.9",
        "v2.1.0",
        "api-service:v2.0.9",
        "NullPointerException",
        "OrderHandler",
        "15 minutes",
    ),
}

#: detect_changed_conditions: how the changed condition is named.
CHANGED_CONDITION: dict[str, tuple[str, ...]] = {
    C_MR_004: ("DiskPressure", "disk pressure", "disk-pressure"),
}
