"""Our CRDs on the real (embedded) API server: installed, imported manifests accepted server-side and
read back unchanged, malformed documents rejected at admission, run transition rules enforced."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
import yaml

from oasis_operator.core.model.crd import API_VERSION, all_crds
from oasis_operator.core.model.credentials_policy import CREDENTIALS_USER, policy_manifests
from oasis_operator.devcluster import binaries, kube
from oasis_operator.loading.documents import load_paths
from oasis_operator.loading.profile_dir import ImportedProfile, manifests

from .conftest import EXAMPLES
from .test_malformed import CASES, Case

pytestmark = pytest.mark.cluster

PLURALS = {"Scenario": "scenarios", "Profile": "profiles", "EvaluationRun": "evaluationruns"}
APPLY = {"fieldManager": "oasis-tests", "fieldValidation": "Strict", "force": "true"}
APPLY_HEADERS = {"Content-Type": "application/apply-patch+yaml"}


@pytest.fixture(scope="module")
def kubeapi(cluster: Any) -> Iterator[httpx2.Client]:
    """An HTTP client from the cluster's admin kubeconfig, with our CRDs installed and served."""
    with kube.http_from_kubeconfig(cluster.kubeconfig, timeout=30.0) as http:
        for crd in all_crds().values():
            name = crd["metadata"]["name"]
            response = http.patch(
                f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}",
                params=APPLY,
                headers=APPLY_HEADERS,
                content=json.dumps(crd),
            )
            assert response.status_code in (200, 201), response.text
        deadline = time.monotonic() + 60
        wanted = set(PLURALS.values())
        while True:
            served = http.get(f"/apis/{API_VERSION}")
            if served.status_code == 200 and wanted <= {r["name"] for r in served.json()["resources"]}:
                break
            assert time.monotonic() < deadline, f"CRDs not served: {served.status_code} {served.text[:300]}"
            time.sleep(0.2)
        # The admission policy the operator installs at start (decision 0099), applied as it applies it.
        for manifest in policy_manifests():
            plural = (
                "validatingadmissionpolicies"
                if manifest["kind"] == "ValidatingAdmissionPolicy"
                else ("validatingadmissionpolicybindings")
            )
            response = http.patch(
                f"/apis/admissionregistration.k8s.io/v1/{plural}/{manifest['metadata']['name']}",
                params=APPLY,
                headers=APPLY_HEADERS,
                content=json.dumps(manifest),
            )
            assert response.status_code in (200, 201), response.text
        yield http


def _url(manifest: dict[str, Any], namespace: str) -> str:
    return f"/apis/{API_VERSION}/namespaces/{namespace}/{PLURALS[manifest['kind']]}/{manifest['metadata']['name']}"


def apply(http: httpx2.Client, manifest: dict[str, Any], namespace: str) -> httpx2.Response:
    body = dict(manifest, metadata={**manifest["metadata"], "namespace": namespace})
    return http.patch(_url(body, namespace), params=APPLY, headers=APPLY_HEADERS, content=json.dumps(body))


def _assert_read_back_unchanged(http: httpx2.Client, manifest: dict[str, Any], namespace: str) -> None:
    got = http.get(_url(manifest, namespace))
    assert got.status_code == 200, got.text
    stored = got.json()
    assert stored["spec"] == manifest["spec"], manifest["metadata"]["name"]
    for key in ("labels", "annotations"):
        assert stored["metadata"].get(key) == manifest["metadata"].get(key), (
            manifest["metadata"]["name"],
            key,
        )


def test_crds_are_established_with_names(kubeapi: httpx2.Client) -> None:
    for crd in all_crds().values():
        got = kubeapi.get(
            f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
        ).json()
        conditions = {c["type"]: c["status"] for c in got["status"]["conditions"]}
        assert conditions["Established"] == "True"
        assert conditions["NamesAccepted"] == "True"
        assert got["status"]["acceptedNames"]["shortNames"] == crd["spec"]["names"]["shortNames"]
        assert got["status"]["acceptedNames"]["categories"] == ["oasis"]


def test_imported_official_profile_is_accepted_and_reads_back_unchanged(
    kubeapi: httpx2.Client, namespace: str, si_import: ImportedProfile
) -> None:
    docs = manifests(si_import)
    assert len(docs) == 51
    for doc in docs:
        response = apply(kubeapi, doc, namespace)
        assert response.status_code in (200, 201), f"{doc['metadata']['name']}: {response.text[:500]}"
        assert response.json()["spec"] == doc["spec"]
    for doc in docs:
        _assert_read_back_unchanged(kubeapi, doc, namespace)
    safety = kubeapi.get(
        f"/apis/{API_VERSION}/namespaces/{namespace}/scenarios",
        params={"labelSelector": "oasis.dev/classification=safety"},
    )
    assert len(safety.json()["items"]) == 21


def _example_manifests() -> list[dict[str, Any]]:
    from oasis_operator.core.model.manifest import scenario_manifest

    result = load_paths(
        [EXAMPLES / "profiles" / "example-kubernetes-ops.yaml", EXAMPLES / "scenarios", EXAMPLES / "runs"]
    )
    assert result.errors == []
    out: list[dict[str, Any]] = []
    for loaded in result.loaded:
        if loaded.kind == "scenario":
            out.append(scenario_manifest(loaded.model, "example-kubernetes-ops"))
        elif loaded.kind in ("profile", "run"):
            out.append(loaded.doc.data)
    return out


PLACEHOLDER = "REPLACE-WITH-YOUR-USER-NAME"


def whoami(http: httpx2.Client) -> str:
    """The requester's user name as the API server sees it (``kubectl auth whoami``)."""
    review = http.post(
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    assert review.status_code == 201, review.text
    return str(review.json()["status"]["userInfo"]["username"])


def as_requester(doc: dict[str, Any], user: str) -> dict[str, Any]:
    """The example with its placeholder replaced, as its reader is told to (decision 0099)."""
    annotations = doc["metadata"].get("annotations", {})
    if annotations.get(CREDENTIALS_USER) != PLACEHOLDER:
        return doc
    return {**doc, "metadata": {**doc["metadata"], "annotations": {**annotations, CREDENTIALS_USER: user}}}


def test_an_example_run_with_the_placeholder_is_refused_with_the_annotation_named(
    kubeapi: httpx2.Client, namespace: str
) -> None:
    run = _run(namespace)
    assert run["metadata"]["annotations"][CREDENTIALS_USER] == PLACEHOLDER
    deadline = time.monotonic() + 30  # the API server loads a new policy by a watch
    while (response := apply(kubeapi, run, namespace)).status_code != 403:
        assert time.monotonic() < deadline, f"accepted: {response.status_code} {response.text[:300]}"
        kubeapi.delete(_url(run, namespace))
        time.sleep(0.2)
    message = response.json()["message"]
    assert CREDENTIALS_USER in message, message
    assert whoami(kubeapi) in message, message


def test_examples_are_accepted_and_read_back_unchanged(kubeapi: httpx2.Client, namespace: str) -> None:
    user = whoami(kubeapi)
    docs = [as_requester(d, user) for d in _example_manifests()]
    assert sorted(d["kind"] for d in docs) == ["EvaluationRun"] * 2 + ["Profile"] + ["Scenario"] * 5
    assert any(d["metadata"].get("annotations", {}).get(CREDENTIALS_USER) == user for d in docs)
    for doc in docs:
        response = apply(kubeapi, doc, namespace)
        assert response.status_code in (200, 201), f"{doc['metadata']['name']}: {response.text[:500]}"
    for doc in docs:
        _assert_read_back_unchanged(kubeapi, doc, namespace)


ADMISSION_CASES = [c for c in CASES if c.admission]


def _as_manifest(case: Case) -> dict[str, Any]:
    data = next(d for d in yaml.safe_load_all(case.path.read_text()) if d is not None)
    if "apiVersion" in data:
        return dict(data)
    return {
        "apiVersion": API_VERSION,
        "kind": "Scenario",
        "metadata": {"name": f"malformed-{case.path.stem}"},
        "spec": data,
    }


def test_admission_corpus_is_substantial() -> None:
    assert len(ADMISSION_CASES) >= 25


@pytest.mark.parametrize("case", ADMISSION_CASES, ids=[c.path.stem for c in ADMISSION_CASES])
def test_crd_schema_rejects_the_same_mistake_at_admission(
    kubeapi: httpx2.Client, namespace: str, case: Case
) -> None:
    manifest = _as_manifest(case)
    body = dict(manifest, metadata={**manifest["metadata"], "namespace": namespace})
    # A create, as `kubectl create` does it: strict field validation reports unknown fields and wrong
    # types as the request's error (server-side apply reports those as a 500 from its typed patch).
    response = kubeapi.post(
        f"/apis/{API_VERSION}/namespaces/{namespace}/{PLURALS[manifest['kind']]}",
        params={"fieldValidation": "Strict", "fieldManager": "oasis-tests"},
        json=body,
    )
    assert response.status_code in (400, 422), f"accepted: {response.status_code} {response.text[:300]}"
    message = response.json()["message"]
    assert case.admission is not None
    assert case.admission in message, message


def _run(namespace: str) -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / "runs" / "example-smoke-run.yaml").read_text())


def test_run_transition_rules(kubeapi: httpx2.Client, namespace: str) -> None:
    run = as_requester(_run(namespace), whoami(kubeapi))
    assert apply(kubeapi, run, namespace).status_code in (200, 201)

    moved = json.loads(json.dumps(run))
    moved["spec"]["profileRef"]["name"] = "another-profile"
    response = apply(kubeapi, moved, namespace)
    assert response.status_code == 422
    assert "profileRef is immutable" in response.json()["message"]

    graceful = json.loads(json.dumps(run))
    graceful["spec"]["shutdown"] = "Graceful"
    assert apply(kubeapi, graceful, namespace).status_code == 200

    withdrawn = apply(kubeapi, run, namespace)
    assert withdrawn.status_code == 422
    assert "shutdown cannot be withdrawn" in withdrawn.json()["message"]

    immediate = json.loads(json.dumps(run))
    immediate["spec"]["shutdown"] = "Immediate"
    assert apply(kubeapi, immediate, namespace).status_code == 200

    softened = apply(kubeapi, graceful, namespace)
    assert softened.status_code == 422

    suspended = json.loads(json.dumps(immediate))
    suspended["spec"]["suspend"] = True
    assert apply(kubeapi, suspended, namespace).status_code == 200


def test_printer_columns_show_the_scenario_classification(
    kubeapi: httpx2.Client, namespace: str, si_import: ImportedProfile
) -> None:
    doc = next(
        d for d in manifests(si_import) if d["metadata"]["name"] == "infra.safety.be.zone-violation-001"
    )
    assert apply(kubeapi, doc, namespace).status_code in (200, 201)
    table = kubeapi.get(
        f"/apis/{API_VERSION}/namespaces/{namespace}/scenarios",
        headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
    ).json()
    columns = [c["name"] for c in table["columnDefinitions"]]
    assert columns[:5] == ["Name", "Classification", "Category", "Archetype", "Tier"]
    assert table["rows"][0]["cells"][:5] == [
        "infra.safety.be.zone-violation-001",
        "safety",
        "boundary-enforcement",
        "S-BE-001",
        1,
    ]


def _published_schema(http: httpx2.Client, kind: str) -> dict[str, Any]:
    """The kind's schema as the API server publishes it in OpenAPI v3: what ``kubectl explain`` reads.
    The server rebuilds it shortly after a CRD changes, so wait until it carries our descriptions."""
    deadline = time.monotonic() + 60
    answer = ""
    while True:
        # While it rebuilds, the server may answer an empty body or an error: ask again.
        index = http.get("/openapi/v3")
        url = (_json(index).get("paths") or {}).get(f"apis/{API_VERSION}", {}).get("serverRelativeURL", "")
        group = http.get(url) if url else index
        answer = f"{group.status_code} {group.text[:200]!r}"
        schemas = (_json(group).get("components") or {}).get("schemas") or {}
        schema: dict[str, Any] = schemas.get(f"dev.oasis.{API_VERSION.split('/')[1]}.{kind}", {})
        if schema.get("properties", {}).get("status", {}).get("description"):
            return schema
        assert time.monotonic() < deadline, (
            f"{kind}: no published schema with descriptions: {url!r}: {answer}"
        )
        time.sleep(0.5)


def _json(response: httpx2.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if response.status_code == 200 and isinstance(body, dict) else {}


def _undescribed(node: dict[str, Any], path: str) -> Iterator[str]:
    for name, sub in node.get("properties", {}).items():
        if not sub.get("description"):
            yield f"{path}.{name}"
        yield from _undescribed(sub, f"{path}.{name}")
    items = node.get("items")
    if isinstance(items, dict):
        yield from _undescribed(items, f"{path}[]")
    values = node.get("additionalProperties")
    if isinstance(values, dict):
        yield from _undescribed(values, f"{path}{{}}")


@pytest.mark.parametrize("kind", sorted(PLURALS))
def test_explain_shows_a_description_for_every_spec_and_status_field(
    kubeapi: httpx2.Client, kind: str
) -> None:
    # `kubectl explain <kind>.spec --recursive` and `.status`: both from the published OpenAPI v3,
    # and from the CRD as the server stores it.
    published = _published_schema(kubeapi, kind)
    stored = kubeapi.get(
        f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{PLURALS[kind]}.oasis.dev"
    ).json()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for schema in (published, stored):
        for part in ("spec", "status"):
            node = schema["properties"][part]
            assert node.get("description"), part
            assert list(_undescribed(node, part)) == [], part
    assert "x-kubernetes-preserve-unknown-fields" not in stored["properties"]["status"]


def test_run_status_is_typed_and_the_agent_and_incomplete_columns_show_it(
    kubeapi: httpx2.Client, namespace: str
) -> None:
    run = as_requester(_run(namespace), whoami(kubeapi))
    assert apply(kubeapi, run, namespace).status_code in (200, 201)
    name = run["metadata"]["name"]
    url = f"/apis/{API_VERSION}/namespaces/{namespace}/evaluationruns/{name}"
    status = {
        "phase": "Failed",
        "verdict": "PROVIDER_FAILURE",
        "agent": {"name": "reference-agent", "version": "1.2.3"},
        "report": {"incomplete": True, "configMaps": ["r-1"]},
        "summary": {"total": 3, "passed": 1, "failed": 0, "excluded": 1},
        "notAField": "pruned",
    }
    response = kubeapi.patch(
        f"{url}/status",
        content=json.dumps({"status": status}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert response.status_code == 200, response.text
    stored = response.json()["status"]
    assert "notAField" not in stored  # typed and closed: unknown keys are pruned
    assert stored["agent"] == status["agent"]
    assert stored["report"] == status["report"]

    wrong = kubeapi.patch(
        f"{url}/status",
        content=json.dumps({"status": {"report": {"incomplete": "maybe"}}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert wrong.status_code == 422, wrong.text
    assert "status.report.incomplete" in wrong.text

    table = kubeapi.get(
        f"/apis/{API_VERSION}/namespaces/{namespace}/evaluationruns",
        headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
        params={"includeObject": "None"},
    ).json()
    columns = [c["name"] for c in table["columnDefinitions"]]
    row = dict(zip(columns, table["rows"][0]["cells"], strict=True))
    assert row["Agent"] == "reference-agent"
    assert row["Incomplete"] is True
    assert row["Verdict"] == "PROVIDER_FAILURE"
    assert row["Excluded"] == 1


@pytest.mark.parametrize("path", ["evaluationrun.spec.agent", "evaluationrun.status.report", "scenario.spec"])
def test_kubectl_explain_prints_the_descriptions(kubeapi: httpx2.Client, cluster: Any, path: str) -> None:
    # kubectl itself, on the fields of one level: every field's description from the models is there.
    kind, *parts = path.split(".")
    plural = {k.lower(): v for k, v in PLURALS.items()}[kind]
    published = _published_schema(kubeapi, {k.lower(): k for k in PLURALS}[kind])
    node = published
    for part in parts:
        node = node["properties"][part]
    kubectl = str(binaries.resolve(quiet=True).path("kubectl"))
    done = subprocess.run(
        [kubectl, "--kubeconfig", str(cluster.kubeconfig), "explain", f"{plural}.{'.'.join(parts)}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert node["description"] in text
    for name, sub in node["properties"].items():
        assert " ".join(sub["description"].split()) in text, name
