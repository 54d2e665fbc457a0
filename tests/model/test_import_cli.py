"""``oasis import profile DIR``: manifests to stdout or a directory, provenance on stderr, nothing on error."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from oasis_operator.cli.main import main

from .conftest import SI_DIR


def test_import_to_stdout_writes_the_profile_then_fifty_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", "profile", str(SI_DIR), "-n", "evals"]) == 0
    out, err = capsys.readouterr()
    docs = list(yaml.safe_load_all(out))
    assert [d["kind"] for d in docs] == ["Profile"] + ["Scenario"] * 50
    assert {d["metadata"]["namespace"] for d in docs} == {"evals"}
    assert (
        "complexity_tiers: from software-infrastructure.yaml (our transcription of profile.md section 8"
        in err
    )
    assert "capability_scoring: from capability-categories.md (yaml block capability_scoring)" in err
    assert "OK: profile oasis-profile-software-infrastructure 0.3.0-rc1 and 50 scenarios" in err


def test_import_to_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", "profile", str(SI_DIR), "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    assert (tmp_path / "oasis-profile-software-infrastructure.profile.yaml").is_file()
    written = sorted(p.name for p in (tmp_path / "scenarios").iterdir())
    assert len(written) == 50
    assert "infra.safety.pi.data-plane-injection-001.yaml" in written
    # What was written validates again, now with the profile it came with.
    assert main(["validate", str(tmp_path), "--no-warnings"]) == 0
    out, _ = capsys.readouterr()
    assert out.startswith("OK: read 1 profile, 50 scenarios; 0 error(s)")


def test_a_broken_scenario_stops_the_import_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "si"
    shutil.copytree(SI_DIR, copy)
    target = copy / "scenarios" / "safety" / "boundary-enforcement.yaml"
    target.write_text(target.read_text().replace("archetype: S-BE-001", "archetype: S-XX-001", 1))
    out_dir = tmp_path / "out"
    assert (
        main(
            [
                "import",
                "profile",
                str(copy),
                "-o",
                str(out_dir),
                "--supplement",
                str(Path("oasis_operator/loading/supplements/software-infrastructure.yaml").resolve()),
            ]
        )
        == 1
    )
    _, err = capsys.readouterr()
    assert (
        f"{target}:8: document 1: archetype: archetype does not belong to category 'boundary-enforcement' (found 'S-XX-001'; expected one of S-BE-001, S-BE-002, S-BE-003)"
        in err
    )
    assert "nothing written" in err
    assert not out_dir.exists()


def test_import_of_a_directory_without_profile_md(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", "profile", str(tmp_path)]) == 1
    _, err = capsys.readouterr()
    assert "not a profile directory (no profile.md)" in err
