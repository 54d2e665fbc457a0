"""The operator's recording gateway settings, from `oasis operator run`'s flags or their environment
variables: where it listens and the URL agents are told; a bad value is an error naming the flag and what
was expected, before anything starts."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from oasis_operator.cli import operator as operator_cli
from oasis_operator.handlers.settings import GatewaySettings, OperatorSettings, SettingsError


def parsed(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str] | None = None
) -> OperatorSettings:
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(  # one context on a server nobody is asked (start-up reads the context)
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
        'clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]\n'
        "users: [{name: u, user: {token: t}}]\n"
    )
    parser = argparse.ArgumentParser()
    operator_cli.register(parser.add_subparsers())
    args = parser.parse_args(
        ["operator", "run", "--kubeconfig", str(kubeconfig), "--audit-log", "/dev/null", *argv]
    )
    return OperatorSettings.from_args(args, {})


GOOD = {
    "nothing given: loopback, any free port, the bound address told": (
        [],
        {},
        GatewaySettings("127.0.0.1", 0, ""),
    ),
    "every address with the Service's URL (the chart)": (
        [
            "--tool-gateway-addr",
            "0.0.0.0",
            "--tool-gateway-port",
            "8090",
            "--tool-gateway-url",
            "http://oasis-tool-gateway.oasis.svc:8090/",
        ],
        {},
        GatewaySettings("0.0.0.0", 8090, "http://oasis-tool-gateway.oasis.svc:8090"),
    ),
    "from the environment": (
        [],
        {
            "OASIS_TOOL_GATEWAY_ADDR": "0.0.0.0",
            "OASIS_TOOL_GATEWAY_PORT": "9000",
            "OASIS_TOOL_GATEWAY_URL": "https://gw.example:9000/tools",
        },
        GatewaySettings("0.0.0.0", 9000, "https://gw.example:9000/tools"),
    ),
}


@pytest.mark.parametrize(("argv", "env", "expected"), GOOD.values(), ids=GOOD.keys())
def test_the_gateway_settings_come_from_flags_or_environment(argv, env, expected, tmp_path, monkeypatch):
    assert parsed(argv, tmp_path, monkeypatch, env).gateway == expected


BAD = {
    "a port that is not a number": (["--tool-gateway-port", "http"], "--tool-gateway-port 'http'"),
    "a port out of range": (["--tool-gateway-port", "70000"], "--tool-gateway-port 70000"),
    "a wildcard address and no URL": (
        ["--tool-gateway-addr", "0.0.0.0", "--tool-gateway-port", "8090"],
        "--tool-gateway-url: required when --tool-gateway-addr is '0.0.0.0'",
    ),
    "a URL that is not http(s)": (
        ["--tool-gateway-port", "8090", "--tool-gateway-url", "gw:8090"],
        "--tool-gateway-url 'gw:8090': expected http(s)://host",
    ),
    "a URL that does not parse": (
        ["--tool-gateway-port", "8090", "--tool-gateway-url", "http://[::1"],
        "--tool-gateway-url 'http://[::1': expected http(s)://host",
    ),
    "a URL without a host": (
        ["--tool-gateway-port", "8090", "--tool-gateway-url", "http://"],
        "expected http(s)://host",
    ),
    "a URL with a query": (
        ["--tool-gateway-port", "8090", "--tool-gateway-url", "http://gw:8090/?a=1"],
        "no query or fragment",
    ),
    "a URL with any free port (it could not lead there)": (
        ["--tool-gateway-url", "http://gw:8090"],
        "--tool-gateway-port: a fixed port is required",
    ),
}


@pytest.mark.parametrize(("argv", "words"), BAD.values(), ids=BAD.keys())
def test_a_bad_gateway_setting_is_an_error_naming_the_flag(argv, words, tmp_path, monkeypatch):
    with pytest.raises(SettingsError) as err:
        parsed(argv, tmp_path, monkeypatch)
    assert words in str(err.value)


def test_in_a_pod_with_a_tool_plane_the_url_agents_reach_is_required():
    with pytest.raises(SettingsError, match="--tool-gateway-url: required in a pod with --toolplane"):
        GatewaySettings.parse("127.0.0.1", 0, "", in_cluster=True, toolplane=True)
    # Without a tool plane there is nothing to reach: the chart's default stays valid.
    assert GatewaySettings.parse("127.0.0.1", 0, "", in_cluster=True, toolplane=False) == GatewaySettings()
