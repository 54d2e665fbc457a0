"""The package as a packager builds it: a wheel built from the checkout (pip, isolated build, as
the Dockerfile does) with no deprecation warning about its metadata, and the licence given as an
SPDX expression (Metadata 2.4 ``License-Expression``)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

from tests.shipping.conftest import REPO


def test_the_wheel_builds_without_a_licence_warning_and_declares_an_spdx_licence(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path), str(REPO)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    output = done.stdout + done.stderr
    assert "license" not in output.casefold(), output[-3000:]
    (wheel,) = tmp_path.glob("oasis_operator-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(archive.read(name).decode())
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["License"] is None  # the deprecated free-text field is gone
