"""``agent.endpoint`` never leads into the operator (decision 0099, review finding M-2).

The run's creator picks the endpoint and the operator fetches it from its own pod: loopback there is
the tool plane's back-ends (one GET to VictoriaMetrics deletes every series), a link-local address
the cloud's metadata service. The spec refuses, whatever the spelling, every address that is never an
agent (unspecified, multicast, link-local), credentials, queries and fragments (a ``#`` swallowed the
identity path); the operator refuses loopback unless it runs locally; the HTTP adapter checks every
resolved address and the connected socket. Each test here failed before that decision."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_operator.adapters.agents.factory import AdapterNotAllowed, EndpointPolicy, build_agent
from oasis_operator.core.model.endpoint import address_problem, host_address, url_problem
from oasis_operator.core.model.errors import ModelValidationError
from oasis_operator.core.model.run import AgentSpec, parse_run_spec


def run_spec(endpoint: str) -> dict[str, Any]:
    return {
        "profileRef": {"name": "si"},
        "scenarios": {"suite": "all"},
        "agent": {"adapter": "http", "endpoint": endpoint},
        "tier": 1,
    }


NEVER = [
    "http://169.254.169.254/latest/meta-data/",  # a cloud's metadata service
    "http://[fe80::1]:8080/",
    "http://0.0.0.0:8428/",
    "http://[::]:8428/",
    "http://224.0.0.1/",
    "http://[::ffff:169.254.169.254]/",  # mapped
    "http://2852039166/",  # 169.254.169.254 as one number
    "http://0xa9.0xfe.0xa9.0xfe/",
    "http://0251.0376.0251.0376/",  # octal
    "http://agent.example/api#",  # a fragment swallows the identity path
    "http://agent.example/api#x",
    "http://agent.example/api?next=/admin",
    "http://user:pw@agent.example/",
    "http://agent.example/\x1b[2Jx",
    "ftp://agent.example/",
]
LOOPBACK = [
    "http://127.0.0.1:8428/api/v1/admin/tsdb/delete_series",
    "http://127.1:8428/",
    "http://2130706433:8428/",
    "http://0x7f000001/",
    "http://[::1]:9090/",
    "http://[::ffff:127.0.0.1]/",
    "http://localhost:8080/",
    "http://LOCALHOST.:8080/",
    "http://agent.localhost/",
]
FINE = [
    "https://agent.example.com/",
    "http://agent.evals.svc:8080/plan/x",
    "http://10.0.3.7:8080/",  # a pod or Service address: where in-cluster agents are
    "http://[2001:db8::7]/",
    "https://192.0.2.10/v1",
]


@pytest.mark.parametrize("endpoint", NEVER)
def test_an_endpoint_that_is_never_an_agent_is_refused_by_the_spec(endpoint: str) -> None:
    with pytest.raises(ModelValidationError, match=r"agent\.endpoint"):
        parse_run_spec(run_spec(endpoint))


@pytest.mark.parametrize("endpoint", LOOPBACK)
def test_loopback_is_the_operator_s_policy_refused_unless_it_runs_locally(endpoint: str) -> None:
    spec = AgentSpec.model_validate({"adapter": "http", "endpoint": endpoint})  # the spec accepts it
    with pytest.raises(AdapterNotAllowed, match="refused by this operator"):
        build_agent(spec, endpoint_policy=EndpointPolicy(allow_local=False))
    build_agent(spec, endpoint_policy=EndpointPolicy(allow_local=True))


@pytest.mark.parametrize("endpoint", FINE)
def test_an_agent_s_address_is_accepted(endpoint: str) -> None:
    spec = parse_run_spec(run_spec(endpoint))
    build_agent(spec.agent, endpoint_policy=EndpointPolicy(allow_local=False))


def _written(address: ipaddress.IPv4Address, form: str) -> str:
    n = int(address)
    parts = [n >> 24, (n >> 16) & 255, (n >> 8) & 255, n & 255]
    return {
        "dotted": str(address),
        "number": str(n),
        "hex": hex(n),
        "octal-parts": ".".join(f"0{p:o}" for p in parts),
        "hex-parts": ".".join(hex(p) for p in parts),
        "three-parts": f"{parts[0]}.{parts[1]}.{(parts[2] << 8) + parts[3]}",
        "mapped": f"[::ffff:{address}]",
    }[form]


FORMS = ["dotted", "number", "hex", "octal-parts", "hex-parts", "three-parts", "mapped"]


@settings(max_examples=300, deadline=None)
@given(st.ip_addresses(v=4), st.sampled_from(FORMS), st.booleans())
def test_every_spelling_of_an_address_is_judged_as_that_address(
    address: ipaddress.IPv4Address, form: str, allow: bool
) -> None:
    written = _written(address, form)
    assert host_address(written.strip("[]")) is not None
    refused = url_problem(f"http://{written}:8080/", allow_loopback=allow) is not None
    assert refused == (address_problem(address, allow_loopback=allow) is not None)


@settings(max_examples=300, deadline=None)
@given(st.ip_addresses(v=4), st.booleans())
def test_an_ipv4_address_is_refused_exactly_when_it_is_never_an_agent(
    address: ipaddress.IPv4Address, allow: bool
) -> None:
    never = address.is_unspecified or address.is_multicast or address.is_link_local
    expected = never or (address.is_loopback and not allow)
    assert (address_problem(address, allow_loopback=allow) is not None) == expected
    wrapped = ipaddress.IPv6Address(f"::ffff:{address}")  # the same address in IPv6 clothing
    assert (address_problem(wrapped, allow_loopback=allow) is not None) == expected


@settings(max_examples=200, deadline=None)
@given(
    st.from_regex(r"[a-z][a-z0-9-]{0,15}(\.[a-z][a-z0-9-]{0,15}){1,3}", fullmatch=True),
    st.integers(1, 65535),
    st.sampled_from(["", "/", "/plan/a.v,b.b", "/v1/agent/"]),
)
def test_a_named_agent_host_is_accepted_by_the_spec(host: str, port: int, path: str) -> None:
    if host.endswith(".localhost") or host in ("localhost",):
        return
    assert url_problem(f"https://{host}:{port}{path}") is None
