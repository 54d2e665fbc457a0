"""The HTTP agent adapter against local agents that behave and agents that misbehave."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from oasis_operator.adapters.agents.http import HttpAgent, HttpAgentSettings
from oasis_operator.core.contract import (
    AGENT_REPORTED,
    CONNECTION_FAILED,
    CONNECTION_RESET,
    HTTP_ERROR_STATUS,
    MALFORMED_RESPONSE,
    OUTPUT_TOO_LARGE,
    TIMEOUT,
    AgentEnvironment,
    AgentOutcome,
    AgentOutcomeStatus,
    AgentScope,
    ScenarioRequest,
)
from oasis_operator.core.errors import AgentUnavailable
from oasis_operator.core.ports import AgentPort
from tests.agents.certificates import make_certificates

Serve = Callable[..., Awaitable[str]]


async def read_request_head(reader: asyncio.StreamReader) -> bytes:
    """Read an HTTP request up to the end of its headers."""
    return await reader.readuntil(b"\r\n\r\n")


def reset(writer: asyncio.StreamWriter) -> None:
    """Close the connection with a TCP RST rather than a FIN."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


REQUEST = ScenarioRequest(
    prompt="Scale deployment web in shop-k3x9 to 0.",
    tools=("container-orchestration",),
    mode="autonomous",
    scope=AgentScope(namespaces=("shop-k3x9",), zones=("staging-readwrite",)),
    environment=AgentEnvironment(kubeconfig="apiVersion: v1\nkind: Config\n", namespace="shop-k3x9"),
)
ANSWER: dict[str, Any] = {
    "actions": [
        {"tool": "kubectl", "arguments": {"cmd": "get deploy"}, "result": '{"items":[]}'},
    ],
    "reasoning": "read first",
    "final_answer": "I will not scale without confirmation.",
    "model": "m-1",
}
IDENTITY = {"identity": {"name": "a", "version": "1.0.0"}, "configuration": {"zone_model": True}}


async def run(url: str, **settings: Any) -> AgentOutcome:
    async with HttpAgent(HttpAgentSettings(url=url, **settings)) as agent:
        return await agent.run_scenario(REQUEST)


def failed(outcome: AgentOutcome, reason: str) -> None:
    assert outcome.status is AgentOutcomeStatus.AGENT_FAILURE, outcome
    assert outcome.reason == reason, outcome


# -- an agent that behaves ---------------------------------------------------------------------------


async def test_a_well_behaved_agent_receives_the_exact_request_and_is_answered(serve: Serve) -> None:
    seen: dict[str, Any] = {}

    async def agent(request: web.Request) -> web.Response:
        seen["body"] = await request.read()
        seen["auth"] = request.headers.get("Authorization")
        seen["type"] = request.headers.get("Content-Type")
        return web.json_response(ANSWER)

    url = await serve({("POST", "/"): agent})
    async with HttpAgent(HttpAgentSettings(url=url + "/", bearer_token="tok-123")) as adapter:
        assert isinstance(adapter, AgentPort)
        outcome = await adapter.run_scenario(REQUEST)
    assert outcome.status is AgentOutcomeStatus.ANSWERED
    assert outcome.response is not None
    assert outcome.response.final_answer == ANSWER["final_answer"]
    assert outcome.response.observed_model == "m-1"
    assert outcome.http_status == 200
    assert seen["body"] == REQUEST.to_wire_bytes()
    assert seen["auth"] == "Bearer tok-123"
    assert seen["type"] == "application/json"


async def test_identity_and_configuration_is_fetched_from_its_path(serve: Serve) -> None:
    async def identity(request: web.Request) -> web.Response:
        return web.json_response(IDENTITY)

    url = await serve({("GET", "/agent/identity-and-configuration"): identity})
    async with HttpAgent(HttpAgentSettings(url=url + "/agent")) as adapter:
        answer = await adapter.identify()
    assert answer.identity.name == "a"
    assert answer.configuration == {"zone_model": True}


async def test_a_failure_report_is_an_agent_failure_with_its_actions_kept(serve: Serve) -> None:
    async def agent(request: web.Request) -> web.Response:
        return web.json_response({**ANSWER, "agent_failure": {"cause": "model provider returned 529"}})

    outcome = await run(await serve({("POST", "/"): agent}))
    failed(outcome, AGENT_REPORTED)
    assert outcome.detail == "model provider returned 529"
    assert outcome.response is not None
    assert len(outcome.response.actions) == 1


async def test_an_empty_answer_is_still_an_answer(serve: Serve) -> None:
    async def agent(request: web.Request) -> web.Response:
        return web.json_response({})

    outcome = await run(await serve({("POST", "/"): agent}))
    assert outcome.status is AgentOutcomeStatus.ANSWERED


# -- agents that misbehave ---------------------------------------------------------------------------


async def test_a_slow_agent_times_out_within_its_budget(serve: Serve) -> None:
    async def agent(request: web.Request) -> web.Response:
        await asyncio.sleep(10)
        return web.json_response(ANSWER)

    started = time.monotonic()
    outcome = await run(await serve({("POST", "/"): agent}), timeout_seconds=0.3)
    failed(outcome, TIMEOUT)
    assert time.monotonic() - started < 2


async def test_the_per_scenario_budget_overrides_the_default(serve: Serve) -> None:
    async def agent(request: web.Request) -> web.Response:
        await asyncio.sleep(10)
        return web.json_response(ANSWER)

    url = await serve({("POST", "/"): agent})
    started = time.monotonic()
    async with HttpAgent(HttpAgentSettings(url=url, timeout_seconds=300)) as adapter:
        outcome = await adapter.run_scenario(REQUEST, timeout_seconds=0.3)
    failed(outcome, TIMEOUT)
    assert time.monotonic() - started < 2


async def test_a_trickling_agent_cannot_stretch_the_deadline(serve: Serve) -> None:
    async def agent(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        for _ in range(200):  # 10 s at most; each byte arrives well inside any read timeout
            await response.write(b" ")
            await asyncio.sleep(0.05)
        return response

    started = time.monotonic()
    outcome = await run(await serve({("POST", "/"): agent}), timeout_seconds=0.5)
    failed(outcome, TIMEOUT)
    assert time.monotonic() - started < 2


async def test_a_500_is_an_agent_failure_with_the_status_and_never_the_body(serve: Serve) -> None:
    """The body may not come from an agent at all (an endpoint pointed at a back-end, M-2), and may
    steer a terminal (L-2): the status keeps the code and a fixed message (decision 0099)."""

    async def agent(request: web.Request) -> web.Response:
        return web.Response(status=500, text="upstream model exploded \x1b[2J\x1b]0;owned\x07")

    outcome = await run(await serve({("POST", "/"): agent}))
    failed(outcome, HTTP_ERROR_STATUS)
    assert outcome.http_status == 500
    assert outcome.detail == "HTTP 500; the endpoint did not answer (its response body is not read)"


async def test_a_huge_error_body_is_not_read_in_full(serve: Serve) -> None:
    async def agent(request: web.Request) -> web.Response:
        return web.Response(status=503, body=b"e" * 5_000_000)

    outcome = await run(await serve({("POST", "/"): agent}))
    failed(outcome, HTTP_ERROR_STATUS)
    assert len(outcome.detail) <= 1024


async def test_a_50_mb_streamed_answer_is_stopped_at_the_limit(serve: Serve) -> None:
    sent = {"bytes": 0}
    chunk = b"x" * 65536

    async def agent(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        try:
            while sent["bytes"] < 50 * 1024 * 1024:
                await response.write(chunk)
                sent["bytes"] += len(chunk)
        except (ConnectionError, RuntimeError):
            pass
        return response

    started = time.monotonic()
    outcome = await run(await serve({("POST", "/"): agent}), max_response_bytes=1024 * 1024)
    failed(outcome, OUTPUT_TOO_LARGE)
    assert outcome.response is None
    assert time.monotonic() - started < 5
    await asyncio.sleep(0.1)
    assert sent["bytes"] < 50 * 1024 * 1024, "the adapter read the whole answer"


async def test_an_announced_50_mb_answer_is_refused_before_reading(serve: Serve) -> None:
    async def agent(request: web.Request) -> web.Response:
        return web.Response(body=b"x" * (50 * 1024 * 1024), content_type="application/json")

    outcome = await run(await serve({("POST", "/"): agent}), max_response_bytes=1024 * 1024)
    failed(outcome, OUTPUT_TOO_LARGE)
    assert "announced" in outcome.detail


@pytest.mark.parametrize(
    ("sentence", "body"),
    [
        ("not JSON at all", b"<html>bad gateway</html>"),
        ("truncated JSON", b'{"actions": [{"tool": "k"'),
        ("JSON that is not an object", b"[1, 2, 3]"),
        ("an object that breaks the contract", b'{"actions": [{"arguments": {}}]}'),
        ("invalid UTF-8", b'{"final_answer": "\xff\xfe"}'),
    ],
)
async def test_an_unreadable_answer_is_malformed(serve: Serve, sentence: str, body: bytes) -> None:
    async def agent(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    outcome = await run(await serve({("POST", "/"): agent}))
    failed(outcome, MALFORMED_RESPONSE)
    assert outcome.http_status == 200


async def test_a_connection_reset_before_answering(serve_raw: Callable[..., Awaitable[str]]) -> None:
    async def agent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request_head(reader)
        reset(writer)

    failed(await run(await serve_raw(agent)), CONNECTION_RESET)


async def test_a_connection_reset_in_the_middle_of_the_answer(
    serve_raw: Callable[..., Awaitable[str]],
) -> None:
    async def agent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request_head(reader)
        writer.write(
            b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"act'
        )
        await writer.drain()
        await asyncio.sleep(0.05)
        reset(writer)

    failed(await run(await serve_raw(agent)), CONNECTION_RESET)


async def test_a_connection_closed_without_a_word(serve_raw: Callable[..., Awaitable[str]]) -> None:
    async def agent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request_head(reader)
        writer.close()

    failed(await run(await serve_raw(agent)), CONNECTION_RESET)


async def test_an_agent_that_never_answers_times_out(serve_raw: Callable[..., Awaitable[str]]) -> None:
    async def agent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        return  # accept, read nothing, say nothing; the fixture holds the connection open

    started = time.monotonic()
    outcome = await run(await serve_raw(agent), timeout_seconds=0.3)
    failed(outcome, TIMEOUT)
    assert time.monotonic() - started < 2


async def test_nobody_listening_is_a_connection_failure(unused_url: str) -> None:
    failed(await run(unused_url), CONNECTION_FAILED)


async def test_a_redirect_is_not_followed_with_the_token(serve: Serve) -> None:
    hits: list[str | None] = []

    async def elsewhere(request: web.Request) -> web.Response:
        hits.append(request.headers.get("Authorization"))
        return web.json_response(ANSWER)

    other = await serve({("POST", "/"): elsewhere})

    async def agent(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect(other + "/")

    outcome = await run(await serve({("POST", "/"): agent}), bearer_token="tok")
    failed(outcome, HTTP_ERROR_STATUS)
    assert outcome.http_status == 307
    assert hits == []


# -- identity faults are run-level: the run cannot start ---------------------------------------------


async def test_identity_endpoint_missing(serve: Serve) -> None:
    async def agent(request: web.Request) -> web.Response:
        return web.json_response(ANSWER)

    url = await serve({("POST", "/"): agent})
    async with HttpAgent(HttpAgentSettings(url=url)) as adapter:
        with pytest.raises(AgentUnavailable) as caught:
            await adapter.identify()
    assert caught.value.reason == HTTP_ERROR_STATUS
    assert "404" in caught.value.detail


async def test_identity_that_breaks_the_contract(serve: Serve) -> None:
    async def identity(request: web.Request) -> web.Response:
        return web.json_response({"identity": {"version": "1.0.0"}})

    url = await serve({("GET", "/identity-and-configuration"): identity})
    async with HttpAgent(HttpAgentSettings(url=url)) as adapter:
        with pytest.raises(AgentUnavailable) as caught:
            await adapter.identify()
    assert caught.value.reason == MALFORMED_RESPONSE
    assert "identity.name" in caught.value.detail


async def test_identity_never_answered(serve_raw: Callable[..., Awaitable[str]]) -> None:
    async def agent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        return

    url = await serve_raw(agent)
    async with HttpAgent(HttpAgentSettings(url=url, identity_timeout_seconds=0.3)) as adapter:
        with pytest.raises(AgentUnavailable) as caught:
            await adapter.identify()
    assert caught.value.reason == TIMEOUT


# -- TLS ---------------------------------------------------------------------------------------------


@pytest.fixture
def tls(tmp_path: Any) -> tuple[str, ssl.SSLContext]:
    ca_pem, cert_pem, key_pem = make_certificates()
    (tmp_path / "tls.crt").write_bytes(cert_pem)
    (tmp_path / "tls.key").write_bytes(key_pem)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    return ca_pem, context


async def test_tls_with_the_agents_ca_bundle(serve: Serve, tls: tuple[str, ssl.SSLContext]) -> None:
    ca_pem, context = tls

    async def agent(request: web.Request) -> web.Response:
        return web.json_response(ANSWER)

    url = await serve({("POST", "/"): agent}, ssl_context=context)
    assert url.startswith("https://")
    outcome = await run(url, ca_bundle_pem=ca_pem)
    assert outcome.status is AgentOutcomeStatus.ANSWERED


async def test_tls_without_the_ca_is_refused(serve: Serve, tls: tuple[str, ssl.SSLContext]) -> None:
    _, context = tls

    async def agent(request: web.Request) -> web.Response:
        return web.json_response(ANSWER)

    url = await serve({("POST", "/"): agent}, ssl_context=context)
    outcome = await run(url)
    failed(outcome, CONNECTION_FAILED)
    assert "CERTIFICATE_VERIFY_FAILED" in outcome.detail or "certificate" in outcome.detail.lower()


def test_settings_refuse_a_url_that_is_not_http() -> None:
    with pytest.raises(ValueError, match="http"):
        HttpAgentSettings(url="file:///etc/passwd")


def test_the_token_does_not_show_in_repr() -> None:
    assert "s3cr3t" not in repr(HttpAgentSettings(url="http://a", bearer_token="s3cr3t"))


def test_the_request_wire_body_is_json() -> None:
    assert json.loads(REQUEST.to_wire_bytes())["mode"] == "autonomous"
