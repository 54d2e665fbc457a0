"""``oasis import profile SOURCE`` where profiles live: a Git repository at a ref with a path inside it,
a local archive, or a directory; bad sources are refused with a message naming them, and an archive
cannot write outside the place it is unpacked to. The repository and archives are built in a
temporary directory from the spec's SI profile (read at its path, never copied into the project)."""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_operator.cli.main import main
from oasis_operator.devcluster import stack
from oasis_operator.devcluster.errors import SetupError

from .conftest import SI_DIR

INNER = "profiles/software-infrastructure"
ONE_SCENARIO = "scenarios/safety/boundary-enforcement.yaml"


def spec_tree(root: Path, *, second_profile: bool = False) -> Path:
    """A spec checkout's layout: ``profiles/software-infrastructure`` (and another profile)."""
    shutil.copytree(SI_DIR, root / INNER)
    if second_profile:
        (root / "profiles" / "other").mkdir(parents=True)
        shutil.copy(SI_DIR / "profile.md", root / "profiles" / "other" / "profile.md")
    return root


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout.strip()


@pytest.fixture
def spec_repo(tmp_path: Path) -> tuple[str, str]:
    """A Git repository of the spec with tag v1.0; after the tag, one scenario file is removed on the
    default branch. Returns its file:// URL and the tagged commit."""
    repo = spec_tree(tmp_path / "oasis-spec")
    git(repo, "init", "--quiet", "--initial-branch=main")
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "profiles")
    git(repo, "tag", "v1.0")
    tagged = git(repo, "rev-parse", "HEAD")
    (repo / INNER / ONE_SCENARIO).unlink()
    git(repo, "commit", "--quiet", "-am", "drop one scenario")
    return repo.as_uri(), tagged


def imported(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict], str]:
    code = main(["import", "profile", *argv])
    out, err = capsys.readouterr()
    return code, (list(yaml.safe_load_all(out)) if code == 0 else []), err


def scenario_count(docs: list[dict]) -> int:
    return sum(d["kind"] == "Scenario" for d in docs)


def test_a_git_url_is_read_at_the_ref_and_path_given(spec_repo: tuple[str, str], capsys) -> None:
    url, tagged = spec_repo
    code, docs, err = imported(capsys, url, "--ref", "v1.0", "--path", INNER)
    assert code == 0, err
    assert scenario_count(docs) == 50  # the tag, before the removal
    code, docs, err = imported(capsys, url, "--path", INNER)  # the remote's HEAD
    assert code == 0, err
    assert scenario_count(docs) == 50 - len(list(yaml.safe_load_all((SI_DIR / ONE_SCENARIO).read_text())))
    code, docs, err = imported(capsys, url, "--ref", tagged)  # a commit; the only profile found alone
    assert code == 0, err
    assert scenario_count(docs) == 50
    # The supplement is found by the profile directory's name, as for a local directory.
    assert "complexity_tiers: from software-infrastructure.yaml" in err


def test_a_git_ref_that_does_not_exist_is_an_error_naming_it(spec_repo: tuple[str, str], capsys) -> None:
    url, _ = spec_repo
    code, _, err = imported(capsys, url, "--ref", "v9.9", "--path", INNER)
    assert code == 2
    assert f"{url}@v9.9: git fetch failed" in err


@pytest.mark.parametrize("suffix", [".tar.gz", ".zip"])
def test_an_archive_is_read_with_or_without_a_path(tmp_path: Path, capsys, suffix: str) -> None:
    tree = spec_tree(tmp_path / "oasis-spec-1.0")
    archive = tmp_path / f"oasis-spec-1.0{suffix}"
    shutil.make_archive(
        str(archive).removesuffix(suffix),
        "gztar" if suffix == ".tar.gz" else "zip",
        root_dir=tmp_path,
        base_dir=tree.name,
    )
    for argv in ([str(archive), "--path", f"oasis-spec-1.0/{INNER}"], [str(archive)]):
        code, docs, err = imported(capsys, *argv)
        assert code == 0, err
        assert scenario_count(docs) == 50


def test_several_profiles_in_a_source_need_a_path(tmp_path: Path, capsys) -> None:
    tree = spec_tree(tmp_path / "spec", second_profile=True)
    archive = tmp_path / "spec.tgz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(tree, arcname="spec")
    code, _, err = imported(capsys, str(archive))
    assert code == 2
    assert (
        "several profiles (spec/profiles/other, spec/profiles/software-infrastructure); choose one with --path"
        in err
    )
    code, _, err = imported(capsys, str(archive), "--path", "spec/profiles/nothing-here")
    assert code == 2
    assert "spec/profiles/nothing-here is not a profile directory (no profile.md there)" in err
    code, _, err = imported(capsys, str(archive), "--path", "../outside")
    assert code == 2
    assert "--path ../outside: expected a relative path inside" in err


def hostile_tar(path: Path, member: str) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        data = b"owned"
        info = tarfile.TarInfo(member)
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    return path


def test_an_archive_cannot_write_outside_where_it_is_unpacked(tmp_path: Path, capsys) -> None:
    archive = hostile_tar(tmp_path / "hostile.tar.gz", "../escaped.txt")
    code, _, err = imported(capsys, str(archive))
    assert code == 2
    assert f"{archive}: cannot unpack" in err
    # An absolute member name is made relative (it lands inside), so nothing is written at that path.
    target = tmp_path / "absolute-escape.txt"
    code, _, err = imported(capsys, str(hostile_tar(tmp_path / "absolute.tar.gz", str(target))))
    assert code == 2
    assert "no profile directory (profile.md) found" in err
    assert not target.exists()
    assert not (tmp_path / "escaped.txt").exists()
    zip_archive = tmp_path / "hostile.zip"
    with zipfile.ZipFile(zip_archive, "w") as zf:
        zf.writestr("../escaped.txt", "owned")
    code, _, err = imported(capsys, str(zip_archive))
    assert code == 2
    assert "points outside the archive" in err


def test_sources_that_are_none_of_the_three_are_refused_with_what_was_expected(
    tmp_path: Path, capsys
) -> None:
    code, _, err = imported(capsys, str(tmp_path / "missing"))
    assert code == 2
    assert (
        err.strip()
        == f"oasis: error: {tmp_path / 'missing'}: no such directory or archive, and not a Git URL"
    )
    note = tmp_path / "notes.txt"
    note.write_text("x")
    code, _, err = imported(capsys, str(note))
    assert code == 2
    assert "expected a profile directory, an archive" in err
    code, _, err = imported(capsys, str(SI_DIR), "--ref", "v1")
    assert code == 2
    assert "--ref applies to a Git repository only" in err


def test_the_demo_says_where_to_point_it_when_the_profile_is_missing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(stack, "SI_PROFILE_DIR", tmp_path / "nowhere")
    monkeypatch.delenv(stack.SI_PROFILE_ENV, raising=False)
    with pytest.raises(SetupError) as raised:
        stack.si_profile(tmp_path / "work")
    message = str(raised.value)
    assert "--profile SOURCE or OASIS_SI_PROFILE=SOURCE" in message
    assert INNER in message
    monkeypatch.setenv(stack.SI_PROFILE_ENV, str(SI_DIR))
    assert stack.si_profile(tmp_path / "work") == SI_DIR
    monkeypatch.setenv(stack.SI_PROFILE_ENV, str(tmp_path / "gone.tgz"))
    with pytest.raises(SetupError, match=r"^\$OASIS_SI_PROFILE: .*gone.tgz: no such directory"):
        stack.si_profile(tmp_path / "work")


# --- a source or ref never reaches git as an option (review finding L-3, decision 0099) ---------------

option_like = st.builds(
    lambda dashes, name, value: f"{dashes}{name}={value}",
    st.sampled_from(["-", "--", " --"]),
    st.sampled_from(["upload-pack", "config", "exec", "receive-pack", "output", "c"]),
    st.text(alphabet="abcdefghij ;/._-", min_size=1, max_size=20),
)


@settings(max_examples=60, deadline=None)
@given(option=option_like, where=st.sampled_from(["source", "ref"]))
def test_a_source_or_ref_that_reads_as_an_option_is_refused_before_git_runs(
    tmp_path_factory: pytest.TempPathFactory, option: str, where: str
) -> None:
    from oasis_operator.loading.profile_source import ProfileSourceError, materialize

    workdir = tmp_path_factory.mktemp("source")
    marker = workdir / "ran"
    payload = option.replace("abcdefghij", "") + f";touch {marker};.git"
    source = payload if where == "source" else "file:///nonexistent/spec.git"
    ref = payload if where == "ref" else None
    with pytest.raises(ProfileSourceError, match="must not begin with '-'"):
        materialize(source, workdir, ref=ref)
    assert not marker.exists()
    assert not (workdir / "repository").exists(), "git was never started"


def test_the_reviewed_upload_pack_source_runs_nothing(tmp_path: Path, capsys) -> None:
    """The review's reproduction: ``--upload-pack=touch <marker>;.git`` used to run ``touch``."""
    marker = tmp_path / "pwned"
    code = main(["import", "profile", "--", f"--upload-pack=touch {marker};.git"])
    assert code == 2
    assert "must not begin with '-'" in capsys.readouterr().err
    assert not marker.exists()


def test_a_url_after_the_separator_still_fetches(spec_repo: tuple[str, str], tmp_path: Path) -> None:
    from oasis_operator.loading.profile_source import materialize

    url, tagged = spec_repo
    found = materialize(url, tmp_path / "w", ref=tagged, path=INNER)
    assert (found / "profile.md").is_file()
