"""The red-team row "SSRF endpoint" (decision 0099, review finding M-2), live: the run's creator is the
adversary here, and the operator's own pod the target.

``agent.endpoint`` is fetched by the operator. Pointed at the pod's loopback it reaches the tool plane's
back-ends (one GET of VictoriaMetrics' ``delete_series`` deletes every scenario's series), and the
answer used to come back in the run's status. Each violating attempt names a loopback back-end — a
recorder standing for it — plainly, spelled as one number, and with a ``#`` that swallows the
identity path; against an operator as the chart runs it, the run ends refused and the back-end never
sees a request. The benign twin, the same run naming a real agent, runs to a verdict on an operator
whose agents run beside it (``--allow-local-agent-endpoints``, as ``oasis run`` and the dev stack
start it): no other address is at hand on one machine.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from oasis_operator.devcluster import kube, stack
from tests.operator.test_lifecycle import SMALL, cond, suites_profile

pytestmark = pytest.mark.cluster


class Backend:
    """Stands for a loopback back-end (VictoriaMetrics' admin API): records every request."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        backend = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                backend.requests.append(self.path)
                body = b'{"status":"success","data":{"deleted":12345}}'
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


VIOLATING = {
    "plain": "http://127.0.0.1:{port}/api/v1/admin/tsdb/delete_series/",
    "one-number": "http://2130706433:{port}/api/v1/admin/tsdb/delete_series/",
    "fragment": "http://127.0.0.1:{port}/api/v1/admin/tsdb/delete_series#",
}


@pytest.fixture(scope="module")
def ssrf(cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    backend = Backend()
    strict, local = f"ssrf-{kube.random_suffix()}", f"ssrf-twin-{kube.random_suffix()}"
    procs = stack.Processes(tmp_path_factory.mktemp("ssrf"))
    try:
        with cluster.admin_http() as http:
            stack.install_crds(http)
            for ns in (strict, local):
                stack.ensure_namespace(http, ns)
                stack.import_si_profile(http, ns)
                stack.apply(http, suites_profile(http, ns, "ssrf", {"one": SMALL[:1]}), ns)
        # As the chart runs it (its pod's loopback is its back-ends), and as the local stack runs it.
        procs.operator(
            cluster.dev.operator_kubeconfig,
            cluster.audit_log,
            namespaces=[strict],
            name="strict",
            local_agents=False,
        )
        procs.operator(cluster.dev.operator_kubeconfig, cluster.audit_log, namespaces=[local], name="local")
        careful = procs.agent("careful")
        with cluster.admin_http() as http:
            for variant, url in VIOLATING.items():
                run = stack.evaluation_run(f"ssrf-{variant}", url.format(port=backend.port), profile="ssrf")
                run["spec"]["scenarios"] = {"suite": "one"}
                stack.apply(http, run, strict)
            twin = stack.evaluation_run("ssrf-twin", careful, profile="ssrf")
            twin["spec"]["scenarios"] = {"suite": "one"}
            stack.apply(http, twin, local)
            done = {v: stack.wait_completed(http, strict, f"ssrf-{v}", 120)["status"] for v in VIOLATING}
            done["twin"] = stack.wait_completed(http, local, "ssrf-twin", 240)["status"]
        yield {"status": done, "backend": backend}
    finally:
        procs.stop()
        backend.server.shutdown()


@pytest.mark.parametrize("variant", list(VIOLATING))
def test_an_endpoint_naming_a_loopback_back_end_is_refused_and_the_back_end_sees_nothing(
    ssrf: dict[str, Any], variant: str
) -> None:
    st = ssrf["status"][variant]
    assert st.get("verdict") is None, st.get("message")
    stalled = cond(st, "Stalled")
    assert stalled["status"] == "True", stalled
    assert stalled["reason"] in ("AdapterNotAllowed", "InvalidSpec"), stalled
    assert "12345" not in str(st), "nothing of the back-end's answer reaches the status"
    assert not st.get("agent")
    assert ssrf["backend"].requests == []


def test_the_benign_twin_a_real_agent_runs_to_a_verdict(ssrf: dict[str, Any]) -> None:
    st = ssrf["status"]["twin"]
    assert st.get("verdict") == "PASS", st.get("message")
    assert st["agent"]["name"]
