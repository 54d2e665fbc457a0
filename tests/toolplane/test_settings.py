"""How the operator finds the tool-plane back-ends: the file `oasis dev-cluster up --backends` writes,
read into typed settings; a bad file is an error naming the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_operator.adapters.toolplane.database_settings import DatabaseSettings
from oasis_operator.adapters.toolplane.gitops import GitOpsSettings
from oasis_operator.adapters.toolplane.logs import LogsSettings
from oasis_operator.adapters.toolplane.metrics import AlertsSettings, MetricsSettings
from oasis_operator.handlers.settings import SettingsError, ToolPlaneSettings


def test_a_written_file_gives_the_log_directory_and_the_git_server(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "gitops").mkdir()
    f = tmp_path / "toolplane.json"
    f.write_text(
        json.dumps(
            {
                "backends": {
                    "logs": {
                        "endpoints": {"kubelet": "https://127.0.0.1:1"},
                        "directory": str(tmp_path / "logs"),
                    },
                    "gitops": {
                        "endpoints": {"git": "http://127.0.0.1:2"},
                        "directory": str(tmp_path / "gitops"),
                    },
                    "metrics": {
                        "endpoints": {"prometheus": "http://127.0.0.1:3", "store": "http://127.0.0.1:4"},
                        "directory": str(tmp_path),
                    },
                }
            }
        )
    )
    s = ToolPlaneSettings.load(f)
    assert s.backends["logs"] == LogsSettings(tmp_path / "logs")
    # A dev cluster's file: Flux reaches the git server where the operator does, and runs in flux-system.
    assert s.backends["gitops"] == GitOpsSettings(
        tmp_path / "gitops", "http://127.0.0.1:2", "http://127.0.0.1:2", "flux-system"
    )
    assert s.endpoints["metrics"] == {"prometheus": "http://127.0.0.1:3", "store": "http://127.0.0.1:4"}
    assert s.backends["metrics"] == MetricsSettings(tmp_path, "http://127.0.0.1:4", "http://127.0.0.1:3")
    assert set(s.backends) == {"logs", "gitops", "metrics"}


def test_the_chart_gives_flux_its_own_url_and_namespace(tmp_path: Path) -> None:
    """Decision 0072: the chart's file names the Service Flux fetches from and where Flux runs."""
    (tmp_path / "gitops").mkdir()
    entry = {
        "endpoints": {"git": "http://127.0.0.1:2", "flux": "http://git.oasis.svc:2"},
        "directory": str(tmp_path / "gitops"),
        "flux_namespace": "gitops-system",
    }
    f = tmp_path / "toolplane.json"
    f.write_text(json.dumps({"backends": {"gitops": entry}}))
    s = ToolPlaneSettings.load(f)
    assert s.of(GitOpsSettings) == GitOpsSettings(
        tmp_path / "gitops", "http://127.0.0.1:2", "http://git.oasis.svc:2", "gitops-system"
    )
    f.write_text(json.dumps({"backends": {"gitops": {**entry, "flux_namespace": ""}}}))
    with pytest.raises(SettingsError, match=r"backends\.gitops\.flux_namespace"):
        ToolPlaneSettings.load(f)


def test_alerts_come_with_their_rule_directory_and_vmalert(tmp_path: Path) -> None:
    (tmp_path / "alerts" / "rules").mkdir(parents=True)
    f = tmp_path / "toolplane.json"
    f.write_text(
        json.dumps(
            {
                "backends": {
                    "metrics": {
                        "endpoints": {"prometheus": "http://127.0.0.1:3", "store": "http://127.0.0.1:4"},
                        "directory": str(tmp_path),
                    },
                    "alerts": {
                        "endpoints": {"vmalert": "http://127.0.0.1:5"},
                        "directory": str(tmp_path / "alerts"),
                    },
                }
            }
        )
    )
    assert ToolPlaneSettings.load(f).of(AlertsSettings) == AlertsSettings(
        tmp_path / "alerts" / "rules", "http://127.0.0.1:5"
    )


def test_the_database_comes_with_its_password_file_and_server(tmp_path: Path) -> None:
    (tmp_path / "database").mkdir()
    (tmp_path / "database" / "admin-password").write_text("x")
    f = tmp_path / "toolplane.json"
    url = "postgresql://oasis@127.0.0.1:6/postgres"
    f.write_text(
        json.dumps(
            {
                "backends": {
                    "database": {"endpoints": {"postgres": url}, "directory": str(tmp_path / "database")}
                }
            }
        )
    )
    assert ToolPlaneSettings.load(f).of(DatabaseSettings) == DatabaseSettings(tmp_path / "database", url)


#: sentence -> (file content, words the error names)
BAD: dict[str, tuple[str, tuple[str, ...]]] = {
    "not JSON": ("{", ("not JSON",)),
    "no backends mapping": ('{"backends": []}', ("field backends",)),
    "a back-end that is not a mapping": ('{"backends": {"logs": 3}}', ("backends.logs",)),
    "a log directory that does not exist": (
        '{"backends": {"logs": {"directory": "/nonexistent/x"}}}',
        ("backends.logs.directory", "/nonexistent/x"),
    ),
    "GitOps without its git server": (
        '{"backends": {"gitops": {"directory": "/tmp"}}}',
        ("backends.gitops",),
    ),
    "metrics without its store": (
        '{"backends": {"metrics": {"directory": "/tmp", "endpoints": {"prometheus": "x"}}}}',
        ("backends.metrics", "endpoints.store"),
    ),
    "traces without the jaeger link": (
        '{"backends": {"traces": {"directory": "/tmp"}}}',
        ("backends.traces.directory", "jaeger"),
    ),
    "the database without its password file": (
        '{"backends": {"database": {"directory": "/tmp", "endpoints": {"postgres": "x"}}}}',
        ("backends.database", "admin-password"),
    ),
    "alerts without metrics": (
        '{"backends": {"alerts": {"directory": "/tmp", "endpoints": {"vmalert": "x"}}}}',
        ("backends.alerts", "metrics back-end"),
    ),
}


@pytest.mark.parametrize("sentence", sorted(BAD))
def test_a_bad_file_is_an_error_naming_the_file_and_field(sentence: str, tmp_path: Path) -> None:
    text, words = BAD[sentence]
    f = tmp_path / "toolplane.json"
    f.write_text(text)
    with pytest.raises(SettingsError) as err:
        ToolPlaneSettings.load(f)
    for word in (str(f), *words):
        assert word in str(err.value)


def test_a_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="cannot read it"):
        ToolPlaneSettings.load(tmp_path / "none.json")


def test_preparing_a_file_makes_what_its_back_ends_read_at_start(tmp_path: Path) -> None:
    """`oasis operator prepare-toolplane` (the chart's init container): the directories, vmalert's
    rules, vmauth's configuration and key; then the file loads."""
    from oasis_operator.handlers.settings import prepare_toolplane

    f = tmp_path / "toolplane.json"
    store, proxy = "http://127.0.0.1:8428", "http://127.0.0.1:9095"
    f.write_text(
        json.dumps(
            {
                "backends": {
                    "metrics": {
                        "directory": str(tmp_path / "v" / "metrics"),
                        "endpoints": {"store": store, "prometheus": "http://127.0.0.1:8427"},
                    },
                    "alerts": {
                        "directory": str(tmp_path / "v" / "alerts"),
                        "endpoints": {"vmalert": "http://127.0.0.1:8880", "alerts-proxy": proxy},
                    },
                }
            }
        )
    )
    with pytest.raises(SettingsError, match=r"backends\.metrics"):
        ToolPlaneSettings.load(f)
    assert prepare_toolplane(f) == (tmp_path / "v" / "metrics", tmp_path / "v" / "alerts")
    settings = ToolPlaneSettings.load(f)
    assert settings.of(AlertsSettings) == AlertsSettings(
        tmp_path / "v" / "alerts" / "rules", "http://127.0.0.1:8880"
    )
    grants = json.loads((tmp_path / "v" / "metrics" / "grants.json").read_text())
    assert (grants["store"], grants["alerts"], grants["grants"]) == (store, proxy, {})
    assert (tmp_path / "v" / "metrics" / "reload-key").read_text()


def test_preparing_the_git_server_makes_its_files_and_keeps_its_credentials(tmp_path: Path) -> None:
    """Decision 0072: the git server refuses to start without its credentials file; a restarted pod's
    credentials stay (a scenario in progress keeps its Flux credential)."""
    import stat

    from oasis_operator.handlers.settings import prepare_toolplane

    f = tmp_path / "toolplane.json"
    directory = tmp_path / "v" / "gitops"
    entry = {"directory": str(directory), "endpoints": {"git": "http://127.0.0.1:8418"}}
    f.write_text(json.dumps({"backends": {"gitops": entry}}))
    assert prepare_toolplane(f) == (directory,)
    assert (directory / "repositories").is_dir()
    credentials = directory / "git-credentials"
    assert credentials.read_text() == ""
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    credentials.write_text("shop-flux secret shop\n")
    prepare_toolplane(f)
    assert credentials.read_text() == "shop-flux secret shop\n"
    assert ToolPlaneSettings.load(f).of(GitOpsSettings) is not None


@pytest.mark.parametrize(
    ("backends", "field"),
    [
        ({"traces": {"directory": "traces"}}, "backends.traces.directory"),
        ({"metrics": {"directory": "{tmp}/metrics", "endpoints": {}}}, "backends.metrics.endpoints.store"),
    ],
)
def test_preparing_a_bad_file_names_the_field(
    backends: dict[str, object], field: str, tmp_path: Path
) -> None:
    from oasis_operator.handlers.settings import prepare_toolplane

    f = tmp_path / "toolplane.json"
    f.write_text(json.dumps({"backends": backends}).replace("{tmp}", str(tmp_path)))
    with pytest.raises(SettingsError, match=field.replace(".", r"\.")):
        prepare_toolplane(f)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["toolplane.json"], "nothing made"


#: Each configured back-end's entry as the dev cluster writes it, with what its row asks for made.
def _complete(root: Path, name: str) -> dict[str, object]:
    from oasis_operator.core.toolplane import registry

    spec = registry.BY_NAME[name].entry
    assert spec is not None
    directory = root / name
    directory.mkdir()
    if spec.holds.endswith("/"):
        (directory / spec.holds).mkdir()
    elif spec.holds:
        (directory / spec.holds).write_text("x")
    return {"directory": str(directory), "endpoints": {e: f"http://127.0.0.1:1/{e}" for e in spec.endpoints}}


def _configured() -> list[str]:
    from oasis_operator.adapters.toolplane import FACTORIES
    from oasis_operator.core.toolplane import registry

    return sorted(n for n in registry.CONFIGURED if n in FACTORIES)


def _break(root: Path, entries: dict[str, dict[str, object]], name: str, part: str, index: int) -> str | None:
    """Take ``part`` of ``name``'s entry away; the field the error must then name (None: nothing taken)."""
    import shutil

    from oasis_operator.core.toolplane import registry

    spec = registry.BY_NAME[name].entry
    assert spec is not None
    if part == "directory" and spec.directory:
        shutil.rmtree(root / name)
        return f"backends.{name}.directory"
    if part == "holds" and spec.holds:
        target = root / name / spec.holds.rstrip("/")
        shutil.rmtree(target) if target.is_dir() else target.unlink()
        return f"backends.{name}.directory"
    if part == "endpoint" and spec.endpoints:
        endpoints = entries[name]["endpoints"]
        assert isinstance(endpoints, dict)
        del endpoints[spec.endpoints[index % len(spec.endpoints)]]
        return f"backends.{name}.endpoints"
    return None


@settings(deadline=None, max_examples=80)
@given(
    chosen=st.sets(st.sampled_from(_configured()), min_size=1),
    broken=st.one_of(
        st.none(), st.tuples(st.integers(0, 10), st.sampled_from(["directory", "holds", "endpoint"]))
    ),
)
def test_a_generated_file_loads_into_exactly_its_back_ends_or_names_the_field_that_is_wrong(
    chosen: set[str], broken: tuple[int, str] | None
) -> None:
    """Every configured back-end's entry is checked against its row: given a file of complete entries
    with at most one part taken away, the settings hold exactly the back-ends of the file, or the error
    names the file and a field of an entry that is wrong."""
    import tempfile

    from oasis_operator.core.toolplane import registry

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        entries = {n: _complete(root, n) for n in sorted(chosen)}
        named: list[str] = []
        if broken is not None:
            index, part = broken
            wrong = _break(root, entries, sorted(chosen)[index % len(chosen)], part, index)
            named += [wrong] if wrong is not None else []
        named += [f"backends.{n}:" for n in chosen for r in registry.BY_NAME[n].requires if r not in chosen]
        f = root / "toolplane.json"
        f.write_text(json.dumps({"backends": entries}))
        if not named:
            assert set(ToolPlaneSettings.load(f).backends) == chosen
            return
        with pytest.raises(SettingsError) as err:
            ToolPlaneSettings.load(f)
        assert str(f) in str(err.value)
        assert any(w in str(err.value) for w in named), (named, str(err.value))
