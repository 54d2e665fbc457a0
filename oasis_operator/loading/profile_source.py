"""Where a profile lives: a directory, a local archive, or a Git repository at a ref.

Who calls it: ``oasis import profile SOURCE`` and ``oasis demo --profile SOURCE``. What it turns into
what: a source text (plus an optional ``ref`` and a ``path`` inside it) -> a directory laid out as the
spec's profiles, ready for :func:`oasis_operator.loading.profile_dir.import_profile`, inside a
working directory the caller owns and removes.

- **Directory:** used as it is.
- **Archive** (``.tar``, ``.tar.gz``, ``.tgz``, ``.tar.bz2``, ``.tar.xz``, ``.zip``): unpacked with
  Python's safe extraction (no absolute paths, no ``..``, no links out, no device files), bounded in
  members and bytes: an archive is input, not trusted code.
- **Git** (``https://``, ``http://``, ``ssh://``, ``git://``, ``file://``, ``user@host:path`` or a
  path ending in ``.git``): fetched shallowly at ``ref`` (a branch, a tag or a commit; default: the
  remote's HEAD) by the ``git`` command, with prompts off and a time limit.

Inside an archive or a repository, ``path`` names the profile directory (the official profiles live
at ``profiles/<name>`` in the spec's repository). Without it, the root is taken when it holds a
``profile.md``, else the one directory below it that does; several candidates are an error that
lists them.
"""

from __future__ import annotations

import os
import re
import subprocess
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

__all__ = ["ARCHIVE_SUFFIXES", "ProfileSourceError", "is_git_url", "materialize"]

ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".zip")
#: Bounds on an archive's content (the SI profile is about 60 files and 400 KB).
MAX_MEMBERS = 20_000
MAX_BYTES = 256 * 1024 * 1024
GIT_TIMEOUT = 300.0
_SCP_LIKE = re.compile(r"^[\w.-]+@[\w.-]+:")


class ProfileSourceError(Exception):
    """The source cannot be read as a profile; the message names it and says what was expected."""


def is_git_url(text: str) -> bool:
    return (
        text.startswith(("https://", "http://", "ssh://", "git://", "file://"))
        or bool(_SCP_LIKE.match(text))
        or text.rstrip("/").endswith(".git")
    )


def is_archive(text: str) -> bool:
    return text.lower().endswith(ARCHIVE_SUFFIXES)


def materialize(source: str, workdir: Path, *, ref: str | None = None, path: str | None = None) -> Path:
    """The profile directory ``source`` names (fetched or unpacked under ``workdir`` when needed)."""
    local = Path(source)
    if is_git_url(source) and not local.is_dir():
        _refuse_options(source, ref)
        root = _fetch(source, ref, workdir / "repository")
    elif ref is not None:
        raise ProfileSourceError(f"{source}: --ref applies to a Git repository only")
    elif local.is_dir():
        if path is None and not _candidates(local):
            return local  # the importer says what a profile directory needs
        root = local
    elif local.is_file() and is_archive(source):
        root = _unpack(local, workdir / "archive")
    elif local.exists():
        raise ProfileSourceError(
            f"{source}: expected a profile directory, an archive ({', '.join(ARCHIVE_SUFFIXES)}) or a Git URL"
        )
    else:
        raise ProfileSourceError(f"{source}: no such directory or archive, and not a Git URL")
    return _profile_dir(root, path, source)


def _profile_dir(root: Path, path: str | None, source: str) -> Path:
    if path is not None:
        inner = PurePosixPath(path)
        if inner.is_absolute() or ".." in inner.parts:
            raise ProfileSourceError(f"--path {path}: expected a relative path inside {source}")
        found = root.joinpath(*inner.parts)
        if not (found / "profile.md").is_file():
            raise ProfileSourceError(f"{source}: {path} is not a profile directory (no profile.md there)")
        return found
    if (root / "profile.md").is_file():
        return root
    candidates = _candidates(root)
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise ProfileSourceError(f"{source}: no profile directory (profile.md) found; name one with --path")
    names = ", ".join(str(c.relative_to(root)) for c in candidates)
    raise ProfileSourceError(f"{source}: several profiles ({names}); choose one with --path")


def _candidates(root: Path) -> list[Path]:
    """Directories holding a ``profile.md`` at the shallowest depth (up to three levels) below ``root``."""
    for depth in ("profile.md", "*/profile.md", "*/*/profile.md", "*/*/*/profile.md"):
        found = sorted(p.parent for p in root.glob(depth))
        if found:
            return found
    return []


def _unpack(archive: Path, into: Path) -> Path:
    into.mkdir(parents=True)
    try:
        if archive.name.lower().endswith(".zip"):
            with zipfile.ZipFile(archive) as zf:
                infos = zf.infolist()
                _check_bounds(archive, len(infos), sum(i.file_size for i in infos))
                for info in infos:
                    parts = PurePosixPath(info.filename).parts
                    if PurePosixPath(info.filename).is_absolute() or ".." in parts:
                        raise ProfileSourceError(
                            f"{archive}: member {info.filename!r} points outside the archive"
                        )
                zf.extractall(into)
        else:
            with tarfile.open(archive) as tf:
                members = tf.getmembers()
                _check_bounds(archive, len(members), sum(m.size for m in members if m.isfile()))
                tf.extractall(into, filter="data")  # refuses absolute paths, '..', links out, devices
    except (tarfile.TarError, zipfile.BadZipFile, OSError) as exc:
        raise ProfileSourceError(f"{archive}: cannot unpack: {exc}") from exc
    return into


def _check_bounds(archive: Path, members: int, size: int) -> None:
    if members > MAX_MEMBERS or size > MAX_BYTES:
        raise ProfileSourceError(
            f"{archive}: {members} members, {size} bytes unpacked; a profile archive "
            f"is expected within {MAX_MEMBERS} members and {MAX_BYTES // 2**20} MiB"
        )


def _refuse_options(url: str, ref: str | None) -> None:
    """Neither the source nor the ref may read as an option of ``git`` (``--upload-pack=<command>``
    runs a command): git parses options after positionals too, so ``--`` alone is not enough for the
    ref, which must follow it."""
    for field, value in (("source", url), ("--ref", ref)):
        if value is not None and value.lstrip().startswith("-"):
            raise ProfileSourceError(
                f"{field} {value!r}: must not begin with '-' (it would reach git as an option); "
                "expected a URL, a path or a ref name"
            )


#: The transports a profile may come over; ``ext::`` (runs a command) and the rest are refused by git.
_GIT_PROTOCOLS = "https:http:ssh:git:file"


def _fetch(url: str, ref: str | None, into: Path) -> Path:
    into.mkdir(parents=True)
    env = {
        **os.environ,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "true",
        "GIT_ALLOW_PROTOCOL": _GIT_PROTOCOLS,
    }

    def git(*args: str) -> None:
        try:
            done = subprocess.run(
                ["git", *args],
                cwd=into,
                env=env,
                capture_output=True,
                text=True,
                timeout=GIT_TIMEOUT,
                check=False,
            )
        except FileNotFoundError as exc:
            raise ProfileSourceError(
                f"{url}: reading a Git repository needs the git command on PATH"
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise ProfileSourceError(f"{url}: git {args[0]} took longer than {GIT_TIMEOUT:.0f}s") from exc
        if done.returncode != 0:
            raise ProfileSourceError(
                f"{url}{'@' + ref if ref else ''}: git {args[0]} failed: {done.stderr.strip()[-500:]}"
            )

    git("init", "--quiet")
    git("fetch", "--quiet", "--depth", "1", "--no-tags", "--", url, ref or "HEAD")
    git("-c", "advice.detachedHead=false", "checkout", "--quiet", "FETCH_HEAD")
    return into
