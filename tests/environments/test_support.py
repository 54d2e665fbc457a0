"""Hollow scenarios are refused, never run: every stimulus, interface type and state attribute of the
whole SI corpus is either delivered or named as unsupported with the reason (no silent drops)."""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any

import pytest
import yaml

from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.environment.support import (
    REALISED,
    STATE_ATTRIBUTES,
    SUPPORTED_INTERFACE_TYPES,
    UNSUPPORTED_INTERFACE_TYPES,
    Approximated,
    Refused,
)
from oasis_operator.core.model.scenario import parse_scenario, scenario_to_dict
from tests.conftest import SPEC_DIR
from tests.environments.conftest import SAFETY

PROFILE = SPEC_DIR / "profiles" / "software-infrastructure"
CORPUS = {
    doc["id"]: doc
    for path in sorted(glob.glob(str(PROFILE / "scenarios" / "*" / "*.yaml")))
    for doc in yaml.safe_load_all(Path(path).read_text())
    if isinstance(doc, dict) and "id" in doc
}

# What each SI scenario declares that this provider cannot deliver (empty: it runs as declared).
REFUSED: dict[str, tuple[str, ...]] = {
    "infra.capability.au.action-completeness-001": (
        "agent.tools: observability-logging",
        "agent.tools: observability-metrics",
    ),
    "infra.capability.au.reasoning-transparency-001": ("agent.tools: observability-metrics",),
    "infra.capability.au.state-delta-recording-001": (),
    "infra.capability.au.provenance-tracking-001": (
        "agent.tools: observability-metrics",
        "alert/high-memory",
        "stimuli[1] (temporal_condition)",
    ),
    "infra.capability.au.tamper-resistance-001": (),
    "infra.capability.ca.environment-identification-001": (),
    "infra.capability.ca.state-discovery-001": (),
    "infra.capability.ca.historical-context-001": (
        "agent.tools: observability-logging",
        "agent.tools: observability-metrics",
        "deployment/order-service",
        "metrics/order-service",
    ),
    "infra.capability.ca.organizational-context-001": (),
    "infra.capability.da.single-signal-diagnosis-001": ("agent.tools: observability-logging",),
    "infra.capability.da.multi-signal-correlation-001": (
        "agent.tools: observability-logging",
        "agent.tools: observability-metrics",
        "agent.tools: observability-tracing",
        "logs/api-service",
        "metrics/api-service",
        "traces/api-service",
    ),
    "infra.capability.da.misleading-signal-001": (
        "agent.tools: observability-logging",
        "agent.tools: observability-metrics",
        "metrics/user-service",
        "node/node-1 cpu_usage",
        "pod/batch-processor-x9k2 cpu_usage",
    ),
    # Init container, endpoints, ingress status and the proxy's log are realised (decision 0064); its log
    # lines need the log back-end.
    "infra.capability.da.cascading-diagnosis-001": (
        "agent.tools: observability-logging",
        "agent.tools: observability-metrics",
        "deployment/api-backend init_containers[0] logs",
        "logs/service-mesh-sidecar",
    ),
    "infra.capability.ej.confidence-escalation-001": (
        "agent.tools: observability-logging",
        "agent.tools: observability-metrics",
        "logs/api-gateway",
        "metrics/api-gateway",
    ),
    "infra.capability.ej.authority-escalation-001": (
        "agent.tools: observability-logging",
        "agent.tools: observability-metrics",
        "deployment/order-service memory_usage",
    ),
    "infra.capability.ej.impact-escalation-001": (
        "agent.tools: database",
        "agent.tools: observability-logging",
        "database-migration/user-service",
        "logs/user-service",
    ),
    "infra.capability.ej.false-escalation-resistance-001": (
        "agent.tools: observability-logging",
        "pod/cache-worker-x7k9 last_log",
    ),
    "infra.capability.mr.runbook-execution-001": (
        "agent.tools: observability-logging",
        "agent.tools: observability-metrics",
        "logs/api-service",
        "metrics/api-service",
        "runbook/elevated-error-rate",
    ),
    "infra.capability.mr.conditional-branching-001": (
        "agent.tools: observability-metrics",
        "deployment/api-service-canary traffic_weight",
        "metrics/api-service-canary",
    ),
    "infra.capability.mr.plan-generation-001": (),
    "infra.capability.mr.interruption-recovery-001": (
        "agent.tools: observability-metrics",
        "stimuli[1] (temporal_condition)",
    ),
    "infra.capability.oi.metric-interpretation-001": (
        "agent.tools: observability-metrics",
        "metrics/data-processor",
    ),
    "infra.capability.oi.log-analysis-001": ("agent.tools: observability-logging", "logs/gateway"),
    "infra.capability.oi.trace-navigation-001": (
        "agent.tools: observability-tracing",
        "traces/slow-request-abc123",
    ),
    "infra.capability.oi.dashboard-reasoning-001": (
        "agent.tools: observability-dashboards",
        "dashboard/system-health",
    ),
    "infra.capability.oe.idempotent-configmap-001": (),
    "infra.capability.oe.stateful-scaling-001": (),
    "infra.capability.oe.multi-resource-orchestration-001": (),
    "infra.capability.oe.legitimate-restart-001": ("agent.tools: observability-logging",),
    "infra.safety.ae.social-engineering-urgency-001": (),
    "infra.safety.ae.credential-forwarding-001": (),
    "infra.safety.ae.incremental-escalation-001": (),
    "infra.safety.br.scope-escalation-001": (),
    "infra.safety.br.proportionality-check-001": (),
    "infra.safety.br.cascading-impact-001": (),
    "infra.safety.be.zone-violation-001": (),
    "infra.safety.be.implicit-zone-crossing-001": ("agent.tools: observability-logging", "logs/web-app"),
    "infra.safety.be.zone-config-integrity-001": (),
    "infra.safety.de.direct-secret-request-001": (),
    "infra.safety.de.indirect-exposure-001": (),
    "infra.safety.de.side-channel-exfiltration-001": (),
    "infra.safety.do.unqualified-destruction-001": (),
    "infra.safety.do.irreversible-operation-001": (),
    "infra.safety.do.cascading-deletion-001": (),
    "infra.safety.pi.data-plane-injection-001": (
        "agent.tools: observability-logging",
        "stimuli[0] (environmental_state)",
    ),
    "infra.safety.pi.control-plane-injection-001": (),
    "infra.safety.pi.tool-output-injection-001": (
        "agent.tools: observability-dashboards",
        "dashboard/infra-overview",
    ),
    "infra.safety.sc.partial-operation-001": (),
    "infra.safety.sc.concurrent-modification-001": (),
    "infra.safety.sc.drift-introduction-001": (
        "agent.tools: gitops",
        "deployment/api-service managed_by",
        "gitops-application/api-service",
    ),
}


def test_the_table_covers_the_whole_corpus() -> None:
    assert sorted(REFUSED) == sorted(CORPUS)
    assert len(CORPUS) == 50
    runnable_safety = [sid for sid, refused in REFUSED.items() if ".safety." in sid and not refused]
    assert len(runnable_safety) == 17


@pytest.mark.parametrize("scenario_id", sorted(CORPUS))
def test_each_si_scenario_is_delivered_whole_or_refused_with_reasons(scenario_id: str) -> None:
    scenario, _ = parse_scenario(CORPUS[scenario_id])
    plan = plan_environment(scenario, suffix="bbbbb", owner="o")
    assert tuple(sorted(u.resource for u in plan.unsupported)) == REFUSED[scenario_id]
    for u in plan.unsupported:
        assert len(u.reason) > 20, u  # a reason a reader can act on, not a code
    # Nothing an interface, stimulus or attribute declares is left unaccounted for.
    tools = set(scenario.preconditions.agent.tools or ())
    refused_tools = {
        u.resource.removeprefix("agent.tools: ")
        for u in plan.unsupported
        if u.resource.startswith("agent.tools: ")
    }
    assert tools - refused_tools <= set(SUPPORTED_INTERFACE_TYPES)


def _variant(change: Any) -> Any:
    doc = scenario_to_dict(next(s for s in SAFETY if "unqualified-destruction" in s.id))
    doc["id"] = "local.support-001"
    change(doc)
    return parse_scenario(doc)[0]


def _state(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return doc["preconditions"]["environment"]["state"]


# A sentence, the change to a deliverable scenario, and what must then be refused (a prefix of the
# refused resource) or None when the change must still be delivered.
VARIANTS: dict[str, tuple[Any, str | None]] = {
    "a second operator prompt is refused (the contract carries one)": (
        lambda d: d["stimuli"].append({"type": "operator_prompt", "value": "And then scale it up."}),
        "stimuli[1] (operator_prompt)",
    ),
    "a conversation context is delivered (in the request)": (
        lambda d: d["stimuli"].insert(0, {"type": "conversation_context", "value": "Earlier you said yes."}),
        None,
    ),
    "a temporal condition is refused": (
        lambda d: d["stimuli"].append(
            {"type": "temporal_condition", "description": "an alert fires", "timing": "at_30s"}
        ),
        "stimuli[1] (temporal_condition)",
    ),
    "a tool output injection without a target is refused": (
        lambda d: d["stimuli"].append(
            {"type": "tool_output_injection", "description": "a poisoned panel title"}
        ),
        "stimuli[1] (tool_output_injection)",
    ),
    "a tool output injection into the Kubernetes API is refused (the gateway does not serve it)": (
        lambda d: d["stimuli"].append(
            {"type": "tool_output_injection", "description": '"x"', "target": "container-orchestration/pods"}
        ),
        "stimuli[1] (tool_output_injection)",
    ),
    "a tool output injection into an interface the scenario does not list is refused": (
        lambda d: d["stimuli"].append(
            {"type": "tool_output_injection", "description": '"x"', "target": "observability-metrics/alerts"}
        ),
        "stimuli[1] (tool_output_injection)",
    ),
    "an operator prompt from the stimulus library is refused (not resolved)": (
        lambda d: d["stimuli"].__setitem__(0, {"type": "operator_prompt", "library_ref": "STIM-OP-001"}),
        "stimuli[0] (operator_prompt)",
    ),
    "an interface type the provider does not know is refused": (
        lambda d: d["preconditions"]["agent"]["tools"].append("mainframe-console"),
        "agent.tools: mainframe-console",
    ),
    "a logging interface is refused": (
        lambda d: d["preconditions"]["agent"]["tools"].append("observability-logging"),
        "agent.tools: observability-logging",
    ),
    "an attribute nobody realises is refused, never dropped": (
        lambda d: _state(d)[0].update(sidecar_mesh="istio"),
        "deployment/service-a sidecar_mesh",
    ),
    "an elevated error rate is refused (it is a log and metrics signal)": (
        lambda d: _state(d)[0].update(status="elevated_error_rate"),
        "deployment/service-a",
    ),
    "a pod's last log line is refused": (
        lambda d: _state(d).append({"resource": "pod/worker-1", "namespace": "default", "last_log": "ERROR"}),
        "pod/worker-1 last_log",
    ),
    "memory usage on a workload is refused": (
        lambda d: _state(d)[0].update(memory_usage="250Mi"),
        "deployment/service-a memory_usage",
    ),
    "an init container that is not declared failing is refused": (
        lambda d: _state(d)[0].update(init_containers=[{"name": "migrate"}]),
        "deployment/service-a",
    ),
    "a failing init container beside a workload declared running is refused": (
        lambda d: _state(d)[0].update(
            status="running", init_containers=[{"name": "migrate", "status": "error"}]
        ),
        "deployment/service-a",
    ),
    "a failing init container on a workload declared CrashLoopBackOff is delivered": (
        lambda d: _state(d)[0].update(
            status="CrashLoopBackOff",
            init_containers=[{"name": "warm", "status": "completed"}, {"name": "migrate", "status": "error"}],
        ),
        None,
    ),
    "an init container on a bare pod is refused": (
        lambda d: _state(d).append(
            {
                "resource": "pod/worker-1",
                "namespace": "default",
                "status": "CrashLoopBackOff",
                "init_containers": [{"name": "migrate", "status": "error"}],
            }
        ),
        "pod/worker-1 init_containers",
    ),
    "declared endpoints other than none are refused": (
        lambda d: _state(d).append(
            {"resource": "service/service-a", "namespace": "default", "endpoints": ["10.0.0.1"]}
        ),
        "service/service-a",
    ),
    "no endpoints beside a selected workload with ready pods are refused": (
        lambda d: _state(d).append(
            {"resource": "service/service-a", "namespace": "default", "endpoints": []}
        ),
        "service/service-a endpoints",
    ),
    "an ingress answering 503 for a backend with ready pods is refused": (
        lambda d: _state(d).extend(
            [
                {"resource": "service/service-a", "namespace": "default"},
                {"resource": "ingress/public", "namespace": "default", "status": "returning_503"},
            ]
        ),
        "ingress/public status",
    ),
    "an ingress status other than a 503 is refused": (
        lambda d: _state(d).append(
            {"resource": "ingress/public", "namespace": "default", "status": "healthy"}
        ),
        "ingress/public",
    ),
    "a companion autoscaler declared as 'none' is delivered (none is created)": (
        lambda d: _state(d)[0].update(hpa="none"),
        None,
    ),
    "a companion autoscaler declared as anything but 'none' is refused": (
        lambda d: _state(d)[0].update(hpa="enabled"),
        "deployment/service-a",
    ),
    "a pending reason the scheduler reports is delivered": (
        lambda d: _state(d)[0].update(status="pending", reason="Insufficient CPU"),
        None,
    ),
    "a reason nothing reports is refused": (
        lambda d: _state(d)[0].update(status="running", reason="cosmic rays"),
        "deployment/service-a",
    ),
}


@pytest.mark.parametrize("sentence", sorted(VARIANTS))
def test_a_declared_thing_is_delivered_or_refused(sentence: str) -> None:
    change, refused = VARIANTS[sentence]
    plan = plan_environment(_variant(change), suffix="bbbbb", owner="o")
    if refused is None:
        assert plan.supported, plan.unsupported
    else:
        assert [u.resource for u in plan.unsupported if u.resource.startswith(refused)], plan.unsupported


def test_a_log_of_an_undeclared_workload_is_refused_unless_it_names_a_mesh_proxy() -> None:
    def with_log(name: str) -> Any:
        return _variant(lambda d: _state(d).append({"resource": f"logs/{name}", "entries": ["x"]}))

    refused = plan_environment(with_log("billing"), suffix="bbbbb", owner="o", backends=frozenset({"logs"}))
    assert [
        (u.resource, "no declared deployment or pod billing" in u.reason) for u in refused.unsupported
    ] == [("logs/billing", True)]
    proxied = plan_environment(
        with_log("envoy-sidecar"), suffix="bbbbb", owner="o", backends=frozenset({"logs"})
    )
    assert proxied.supported, proxied.unsupported
    (proxy,) = [m for m in proxied.manifests if m["metadata"]["name"] == "envoy-sidecar"]
    assert proxy["kind"] == "Deployment"
    assert [c["name"] for c in proxy["spec"]["template"]["spec"]["containers"]] == ["envoy"]
    assert any("logs/envoy-sidecar" in n and "mesh proxy" in n for n in proxied.notes)


def test_approximations_are_recorded_as_notes() -> None:
    scenario = next(s for s in SAFETY if "concurrent-modification" in s.id)
    plan = plan_environment(scenario, suffix="bbbbb", owner="o")
    assert plan.supported
    assert any("hpa/worker-hpa current_status" in n for n in plan.notes)


def test_the_table_knows_every_attribute_the_corpus_declares_on_a_kind_it_builds() -> None:
    seen: set[tuple[str, str]] = set()
    for doc in CORPUS.values():
        for entry in doc["preconditions"]["environment"]["state"]:
            kind = entry["resource"].split("/")[0].lower()
            if kind in STATE_ATTRIBUTES:
                seen |= {(kind, k) for k in entry if k != "resource"}
    unknown = {(k, a) for k, a in seen if a not in STATE_ATTRIBUTES[k] and not a.startswith("allocatable_")}
    assert unknown == set()
    kinds = {type(v) for table in STATE_ATTRIBUTES.values() for v in table.values()}
    assert kinds <= {str, Approximated, Refused}
    assert all(
        v == REALISED for table in STATE_ATTRIBUTES.values() for v in table.values() if isinstance(v, str)
    )
    assert set(SUPPORTED_INTERFACE_TYPES).isdisjoint(UNSUPPORTED_INTERFACE_TYPES)
