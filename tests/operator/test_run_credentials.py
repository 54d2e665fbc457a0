"""``credentialsRef`` sends a Secret to the agent only if the user who chose where it goes may read it
(decision 0099, review finding M-1). ``create evaluationruns`` alone used to disclose any Secret of the
namespace: the operator read it with its own rights and sent it as the bearer token to an endpoint
of the run creator's choice. Now the run names that user in an annotation the admission policy pins
to the authenticated requester, and the operator asks the API server (a SubjectAccessReview as that
user) before it reads the Secret. Live, through the operator; the refusals failed before."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx2
import pytest

from oasis_operator.core.model.credentials_policy import CREDENTIALS_USER, POLICY_NAME, POLICY_SETTLE
from oasis_operator.devcluster import stack
from tests.operator.test_lifecycle import cond

pytestmark = pytest.mark.cluster
OPERATOR_TOOLPLANE = False
SECRET_VALUE = "sk-never-to-an-unknown-endpoint"
IDENTITY = {"identity": {"name": "recorder", "version": "1.0.0"}, "configuration": {}}


class Recorder:
    """An agent endpoint that records the Authorization header of every request it gets."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, body: dict[str, Any]) -> None:
                recorder.seen.append((self.path, self.headers.get("Authorization") or ""))
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._answer(IDENTITY)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._answer({"actions": [], "reasoning": "", "final_answer": "I made no change."})

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/agent/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def bearers(self) -> list[str]:
        return [auth for _, auth in self.seen if auth]


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    r = Recorder()
    yield r
    r.server.shutdown()


def _ok(response: httpx2.Response) -> dict[str, Any]:
    assert response.status_code in (200, 201), response.text[:500]
    return dict(response.json())


@pytest.fixture(scope="module")
def people(cluster, installation) -> dict[str, Any]:
    """Two users who may create and edit runs in the namespace and may not read its Secrets, and the
    Secret a run will name."""
    ns = installation.namespace
    with cluster.admin_http() as admin:
        _ok(
            admin.post(
                f"/api/v1/namespaces/{ns}/secrets",
                json={"metadata": {"name": "model-key"}, "stringData": {"token": SECRET_VALUE}},
            )
        )
        _ok(
            admin.post(
                f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
                json={
                    "metadata": {"name": "run-author"},
                    "rules": [
                        {
                            "apiGroups": ["oasis.dev"],
                            "resources": ["evaluationruns"],
                            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
                        }
                    ],
                },
            )
        )
        tokens = {}
        for who in ("author", "colleague"):
            _ok(admin.post(f"/api/v1/namespaces/{ns}/serviceaccounts", json={"metadata": {"name": who}}))
            _ok(
                admin.post(
                    f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
                    json={
                        "metadata": {"name": f"run-author-{who}"},
                        "roleRef": {
                            "apiGroup": "rbac.authorization.k8s.io",
                            "kind": "Role",
                            "name": "run-author",
                        },
                        "subjects": [{"kind": "ServiceAccount", "name": who, "namespace": ns}],
                    },
                )
            )
            tokens[who] = _ok(
                admin.post(
                    f"/api/v1/namespaces/{ns}/serviceaccounts/{who}/token",
                    json={"spec": {"expirationSeconds": 3600}},
                )
            )["status"]["token"]
    # The operator installed the policy at its start; the API server enforces it once its watch has it.
    forged = run_doc("probe", "http://198.51.100.7/", "kubernetes-admin")
    with cluster.token_http(tokens["author"]) as http:
        deadline = time.monotonic() + 30
        while (
            http.post(
                f"/apis/oasis.dev/v1alpha1/namespaces/{ns}/evaluationruns",
                params={"dryRun": "All"},
                json={**forged, "metadata": {**forged["metadata"], "namespace": ns}},
            ).status_code
            != 403
        ):
            assert time.monotonic() < deadline, "the credentials policy is never enforced"
            time.sleep(0.2)
    time.sleep(POLICY_SETTLE.total_seconds())  # runs created from now on are after the policy
    return {"ns": ns, "tokens": tokens, "user": {w: f"system:serviceaccount:{ns}:{w}" for w in tokens}}


def run_doc(name: str, url: str, user: str | None) -> dict[str, Any]:
    doc = stack.evaluation_run(name, url)
    doc["spec"]["agent"]["credentialsRef"] = {"name": "model-key", "key": "token"}
    if user is not None:
        doc["metadata"]["annotations"] = {CREDENTIALS_USER: user}
    return doc


def create_as(cluster, token: str, ns: str, doc: dict[str, Any]) -> httpx2.Response:
    with cluster.token_http(token) as http:
        return http.post(
            f"/apis/oasis.dev/v1alpha1/namespaces/{ns}/evaluationruns",
            json={**doc, "metadata": {**doc["metadata"], "namespace": ns}},
        )


def wait_status(cluster, ns: str, name: str, done: Any, timeout: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    st: dict[str, Any] = {}
    with cluster.admin_http() as admin:
        while time.monotonic() < deadline:
            st = (
                admin.get(f"/apis/oasis.dev/v1alpha1/namespaces/{ns}/evaluationruns/{name}")
                .json()
                .get("status")
                or {}
            )
            if done(st):
                return st
            time.sleep(0.5)
    pytest.fail(f"{name}: status never got there: {st}")


def test_a_run_cannot_name_another_user_as_who_chose_the_secret(cluster, people, recorder: Recorder) -> None:
    forged = create_as(
        cluster, people["tokens"]["author"], people["ns"], run_doc("forged", recorder.url, "kubernetes-admin")
    )
    assert forged.status_code == 403, forged.text[:300]
    assert POLICY_NAME in forged.json()["message"]
    assert people["user"]["author"] in forged.json()["message"]  # it says which name is expected
    missing = create_as(
        cluster, people["tokens"]["author"], people["ns"], run_doc("unnamed", recorder.url, None)
    )
    assert missing.status_code == 403, missing.text[:300]


def test_a_secret_the_run_s_author_may_not_read_is_never_sent(cluster, people, recorder: Recorder) -> None:
    ns = people["ns"]
    made = create_as(
        cluster, people["tokens"]["author"], ns, run_doc("harvest", recorder.url, people["user"]["author"])
    )
    assert made.status_code == 201, made.text[:300]
    st = wait_status(
        cluster,
        ns,
        "harvest",
        lambda s: any(c["type"] == "Stalled" and c["status"] == "True" for c in s.get("conditions") or []),
    )
    stalled = cond(st, "Stalled")
    assert stalled["reason"] == "AdapterNotAllowed", stalled
    assert "may not get that Secret" in stalled["message"]
    assert SECRET_VALUE not in json.dumps(st)
    assert recorder.seen == [], "the endpoint was never called"


def test_the_benign_twin_a_secret_the_author_may_read_is_sent_and_no_one_else_may_redirect_it(
    cluster, people, recorder: Recorder
) -> None:
    ns = people["ns"]
    with cluster.admin_http() as admin:
        _ok(
            admin.post(
                f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
                json={
                    "metadata": {"name": "read-model-key"},
                    "rules": [
                        {
                            "apiGroups": [""],
                            "resources": ["secrets"],
                            "resourceNames": ["model-key"],
                            "verbs": ["get"],
                        }
                    ],
                },
            )
        )
        _ok(
            admin.post(
                f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
                json={
                    "metadata": {"name": "read-model-key"},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "Role",
                        "name": "read-model-key",
                    },
                    "subjects": [{"kind": "ServiceAccount", "name": "author", "namespace": ns}],
                },
            )
        )
    made = create_as(
        cluster, people["tokens"]["author"], ns, run_doc("allowed", recorder.url, people["user"]["author"])
    )
    assert made.status_code == 201, made.text[:300]
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not recorder.bearers():
        time.sleep(0.3)
    assert recorder.bearers()[:1] == [f"Bearer {SECRET_VALUE}"]
    # A colleague who may edit runs but not read the Secret cannot point it at an endpoint of theirs.
    with cluster.token_http(people["tokens"]["colleague"]) as http:
        moved = http.patch(
            f"/apis/oasis.dev/v1alpha1/namespaces/{ns}/evaluationruns/allowed",
            json={"spec": {"agent": {"endpoint": "http://198.51.100.7/mine/"}}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        # Refused by the CRD's own rule (the agent is immutable) before the credentials policy.
        assert moved.status_code in (403, 422), moved.text[:300]
        stored = http.get(f"/apis/oasis.dev/v1alpha1/namespaces/{ns}/evaluationruns/allowed").json()
        assert stored["spec"]["agent"]["endpoint"] == recorder.url
        # Nor can they take over the run's credentials by writing their name over the author's.
        taken = http.patch(
            f"/apis/oasis.dev/v1alpha1/namespaces/{ns}/evaluationruns/allowed",
            json={"metadata": {"annotations": {CREDENTIALS_USER: people["user"]["author"] + "x"}}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert taken.status_code == 403, taken.text[:300]
        # Editing anything but the agent is theirs to do.
        suspended = http.patch(
            f"/apis/oasis.dev/v1alpha1/namespaces/{ns}/evaluationruns/allowed",
            json={"spec": {"suspend": True}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert suspended.status_code == 200, suspended.text[:300]
    with cluster.admin_http() as admin:
        admin.delete(f"/apis/oasis.dev/v1alpha1/namespaces/{ns}/evaluationruns/allowed")


def test_the_access_review_asks_as_the_named_user_with_only_the_groups_it_surely_has() -> None:
    from oasis_operator.core.model.credentials_policy import access_review

    review = access_review("system:serviceaccount:evals:author", "evals", "model-key")["spec"]
    assert review["user"] == "system:serviceaccount:evals:author"
    assert review["groups"] == [
        "system:authenticated",
        "system:serviceaccounts",
        "system:serviceaccounts:evals",
    ]
    assert review["resourceAttributes"] == {
        "namespace": "evals",
        "verb": "get",
        "resource": "secrets",
        "name": "model-key",
    }
    assert access_review("alice@example.com", "evals", "k")["spec"]["groups"] == ["system:authenticated"]
