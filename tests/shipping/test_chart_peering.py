"""The chart's guard against a second operator (decision 0114): with `operator.peering` (the default)
the operator joins kopf's peering named for the release, may create and patch the peering objects,
and the chart installs kopf's peering CRDs, the same file the dev cluster installs."""

from __future__ import annotations

import yaml

from oasis_operator.adapters.k8s import peering
from tests.shipping.conftest import REPO, Render, by_kind

CHART_COPY = REPO / "charts" / "oasis-operator" / "files" / peering.CRD_FILE


def operator_args(docs: list[dict]) -> list[str]:
    (deployment,) = [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == "oasis-operator"]
    return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])


def peering_rules(docs: list[dict]) -> list[dict]:
    return [r for role in by_kind(docs, "ClusterRole") for r in role["rules"] if "kopf.dev" in r["apiGroups"]]


def test_the_chart_copy_of_the_peering_crds_is_the_packages() -> None:
    assert list(yaml.safe_load_all(CHART_COPY.read_text())) == peering.crds()


def test_by_default_the_operator_joins_the_peering_it_may_write(render: Render) -> None:
    docs = render()
    assert "--peering=oasis-operator" in operator_args(docs)
    crds = {c["metadata"]["name"]: c for c in by_kind(docs, "CustomResourceDefinition")}
    for source in peering.crds():
        crd = crds[source["metadata"]["name"]]
        assert crd["spec"] == source["spec"]
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        assert crd["metadata"]["labels"]["app.kubernetes.io/instance"]
    (rule,) = peering_rules(docs)
    assert set(rule["resources"]) == {"clusterkopfpeerings", "kopfpeerings"}
    assert {"get", "list", "watch", "create", "patch"} == set(rule["verbs"])


def test_with_targets_the_smaller_role_has_the_peering_rule_too(render: Render) -> None:
    assert len(peering_rules(render({"scenarioClusters": {"mode": "targets"}}))) == 1


def test_peering_off_leaves_no_trace(render: Render) -> None:
    docs = render({"operator": {"peering": False}})
    assert not [a for a in operator_args(docs) if a.startswith("--peering")]
    assert not peering_rules(docs)
    assert not [c for c in by_kind(docs, "CustomResourceDefinition") if c["spec"]["group"] == "kopf.dev"]


def test_each_shard_has_its_own_peering_object() -> None:
    assert peering.peering_name("oasis-operator", 0, 1) == "oasis-operator"
    names = {peering.peering_name("oasis-operator", i, 3) for i in range(3)}
    assert names == {f"oasis-operator-shard-{i}-of-3" for i in range(3)}
