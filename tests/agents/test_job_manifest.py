"""The Kubernetes Job agent adapter's manifest builders (pure).

The builders are tested here; the lifecycle on the control plane is in test_job_agent_cluster.py.
An agent image actually answering needs a cluster with real nodes: the embedded control plane's
kwok nodes simulate pods without running images.
"""

from __future__ import annotations

import json

import pytest

from oasis_operator.adapters.agents.job import (
    IDENTITY_ARGUMENT,
    AgentJobSettings,
    AgentJobTarget,
    build_agent_job,
    build_request_config_map,
    in_cluster_kubeconfig,
    parse_log_answer,
)
from oasis_operator.core.contract import (
    AgentEnvironment,
    AgentScope,
    ContractViolation,
    ScenarioRequest,
    ToolEndpoint,
)

SETTINGS = AgentJobSettings(
    image="registry.example/agent@sha256:" + "a" * 64,
    args=("--verbose",),
    env={"MODEL": "m-1"},
    timeout_seconds=120.5,
    memory_limit="512Mi",
    cpu_limit="500m",
    labels={"app.kubernetes.io/managed-by": "ops"},
    image_pull_secrets=("pull",),
)
TARGET = AgentJobTarget(name="worker-7f3k", namespace="shop-k3x9", service_account="worker-7f3k")
REQUEST = ScenarioRequest(
    prompt="Restart the web pods.",
    tools=("container-orchestration",),
    mode="autonomous",
    scope=AgentScope(namespaces=("shop-k3x9",)),
    environment=AgentEnvironment(
        kubeconfig="users: [{user: {token: operator-side-secret}}]",
        namespace="shop-k3x9",
        tool_endpoints={
            "observability-metrics": ToolEndpoint(
                url="http://gateway.oasis:8080/r/observability-metrics/", token="scoped-token"
            )
        },
    ),
)


def pod_spec(job: dict) -> dict:  # type: ignore[type-arg]
    return job["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def test_the_job_runs_in_the_scenario_namespace_as_the_scenario_service_account() -> None:
    job = build_agent_job(SETTINGS, TARGET, config_map="worker-7f3k-x8k2q")
    assert job["metadata"]["namespace"] == "shop-k3x9"
    assert job["metadata"]["generateName"] == "worker-7f3k-"  # never an existing object's name
    assert "name" not in job["metadata"]
    spec = pod_spec(job)
    assert spec["serviceAccountName"] == "worker-7f3k"
    assert spec["automountServiceAccountToken"] is True
    assert spec["restartPolicy"] == "Never"


def test_the_job_is_bounded_and_unprivileged() -> None:
    job = build_agent_job(SETTINGS, TARGET)
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["activeDeadlineSeconds"] == 121
    container = pod_spec(job)["containers"][0]
    assert container["resources"]["limits"] == {"cpu": "500m", "memory": "512Mi"}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod_spec(job)["enableServiceLinks"] is False


def test_the_job_refuses_simulated_nodes() -> None:
    terms = pod_spec(build_agent_job(SETTINGS, TARGET))["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "type", "operator": "NotIn", "values": ["kwok"]}]}]
    assert "tolerations" not in pod_spec(build_agent_job(SETTINGS, TARGET))


def test_the_request_is_mounted_from_the_config_map() -> None:
    spec = pod_spec(build_agent_job(SETTINGS, TARGET, config_map="worker-7f3k-x8k2q"))
    container = spec["containers"][0]
    env = {item["name"]: item["value"] for item in container["env"]}
    assert env == {
        "MODEL": "m-1",
        "TASK_REQUEST_FILE": "/var/run/task/request.json",
        "KUBECONFIG": "/var/run/task/kubeconfig",
    }
    assert {"name": "task", "configMap": {"name": "worker-7f3k-x8k2q"}} in spec["volumes"]
    assert {"name": "task", "mountPath": "/var/run/task", "readOnly": True} in container["volumeMounts"]
    assert container["args"] == ["--verbose"]
    assert spec["imagePullSecrets"] == [{"name": "pull"}]


def test_the_config_map_carries_the_request_with_an_in_cluster_kubeconfig_and_no_secret() -> None:
    config_map = build_request_config_map(SETTINGS, TARGET, REQUEST)
    assert config_map["metadata"] == {
        "generateName": "worker-7f3k-",
        "namespace": "shop-k3x9",
        "labels": {"app.kubernetes.io/managed-by": "ops"},
    }
    sent = json.loads(config_map["data"]["request.json"])
    assert sent["prompt"] == REQUEST.prompt
    assert sent["environment"]["tool_endpoints"] == {
        "observability-metrics": {
            "url": "http://gateway.oasis:8080/r/observability-metrics/",
            "token": "scoped-token",
        }
    }
    assert (
        sent["environment"]["kubeconfig"]
        == config_map["data"]["kubeconfig"]
        == in_cluster_kubeconfig("shop-k3x9")
    )
    assert "operator-side-secret" not in json.dumps(config_map)


def test_the_in_cluster_kubeconfig_uses_the_pods_token_and_namespace() -> None:
    config = json.loads(in_cluster_kubeconfig("shop-k3x9"))
    assert config["users"][0]["user"] == {"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}
    assert config["contexts"][0]["context"]["namespace"] == "shop-k3x9"
    assert config["clusters"][0]["cluster"]["server"] == "https://kubernetes.default.svc"


def test_the_identity_job_asks_the_identity_question_without_a_request() -> None:
    target = AgentJobTarget("agent-identity", "agents", "default")
    spec = pod_spec(build_agent_job(SETTINGS, target, identity=True))
    container = spec["containers"][0]
    assert container["args"] == ["--verbose", IDENTITY_ARGUMENT]
    assert all(volume["name"] != "task" for volume in spec["volumes"])
    assert "TASK_REQUEST_FILE" not in {item["name"] for item in container["env"]}
    # It runs before any scenario: unjudged, so without a token (decision 0099, M-3).
    assert spec["automountServiceAccountToken"] is False


def test_the_identity_question_s_place_admits_no_traffic_and_is_named_by_the_server() -> None:
    from oasis_operator.adapters.agents.job_objects import IDENTITY_LABEL, deny_all_policy, identity_namespace

    namespace = identity_namespace("evals.my run/1")
    assert namespace["metadata"]["generateName"] == "agent-"
    assert namespace["metadata"]["labels"] == {IDENTITY_LABEL: "evals.my-run-1"}
    policy = deny_all_policy("agent-x8k2q")
    assert policy["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}


def test_the_builders_are_deterministic() -> None:
    assert build_agent_job(SETTINGS, TARGET) == build_agent_job(SETTINGS, TARGET)
    assert build_request_config_map(SETTINGS, TARGET, REQUEST) == build_request_config_map(
        SETTINGS, TARGET, REQUEST
    )


@pytest.mark.parametrize(
    ("sentence", "log", "answer"),
    [
        ("the whole log is the answer", b'{\n  "final_answer": "a"\n}\n', "a"),
        ("log lines first, answer last", b'starting\nthinking...\n{"final_answer": "b"}\n', "b"),
    ],
)
def test_the_answer_is_read_from_the_log(sentence: str, log: bytes, answer: str) -> None:
    assert parse_log_answer(log).final_answer == answer


def test_a_log_without_an_answer_is_a_contract_violation() -> None:
    with pytest.raises(ContractViolation):
        parse_log_answer(b"starting\ncrashed\n")


def test_settings_refuse_an_empty_image() -> None:
    with pytest.raises(ValueError, match="image"):
        AgentJobSettings(image="")
