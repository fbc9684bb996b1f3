"""What ``pip install`` makes of the project: the version, the console script, the wheel.

``--version`` answers from ``diverge_notifications.__version__`` (the one
source: ``pyproject.toml`` reads it too), through ``python -m`` and through
the console script ``pip`` installed beside this interpreter (skipped when
there is none: the package is not installed in this environment). The
wheel is built from a copy of what it is made of (``pip wheel --no-deps
--no-build-isolation``, so nothing is downloaded) and must carry the
license and the metadata declared, without a deprecation warning about the
license in the build's output.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from email.parser import HeaderParser
from pathlib import Path

import pytest

import diverge_notifications
from diverge_notifications.cli.running import prog_name
from tests.interop import HANG_GUARD, ROOT, cli_command, run_cli

#: What the wheel is built from (``[tool.setuptools]`` finds the package; the rest is metadata).
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "diverge_notifications")
#: Build a wheel of this project alone, with the build backend installed here (no download).
PIP_WHEEL = [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation"]
#: The console script ``[project.scripts]`` declares.
SCRIPT = Path(sys.executable).parent / "diverge-notifications"


def test_version_through_python_m() -> None:
    result = run_cli(cli_command("--version"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() == f"diverge-notifications {diverge_notifications.__version__}\n"


def test_the_console_script_gives_the_version_and_names_itself() -> None:
    if not SCRIPT.exists():
        pytest.skip(f"no console script at {SCRIPT}: the package is not installed here")
    version = run_cli([str(SCRIPT), "--version"])
    assert version.returncode == 0, version.stderr
    assert version.stdout.decode() == f"diverge-notifications {diverge_notifications.__version__}\n"
    usage = run_cli([str(SCRIPT), "listen"])
    assert usage.returncode == 2
    lines = usage.stderr.decode().splitlines()
    assert lines[0].startswith("usage: diverge-notifications listen ")
    assert lines[-1].startswith("diverge-notifications listen: error: ")
    late = run_cli([str(SCRIPT), "listen", "ftp://127.0.0.1:1"])  # an error after parsing
    assert late.stderr.decode().startswith("diverge-notifications listen: error: malformed URL")


@pytest.mark.parametrize(
    ("argv0", "name"),
    [
        ("/srv/app/.venv/bin/diverge-notifications", "diverge-notifications"),
        ("diverge-notifications", "diverge-notifications"),
        ("C:\\app\\Scripts\\diverge-notifications.exe", "diverge-notifications"),
        ("/srv/app/diverge_notifications/__main__.py", "python -m diverge_notifications"),
        ("-m", "python -m diverge_notifications"),
        ("/usr/bin/my-tool", "python -m diverge_notifications"),
        ("", "python -m diverge_notifications"),
    ],
)
def test_prog_name(argv0: str, name: str) -> None:
    assert prog_name(argv0) == name


def test_python_m_names_itself() -> None:
    usage = run_cli(cli_command("listen"))
    assert usage.returncode == 2
    assert (
        usage.stderr.decode()
        .splitlines()[-1]
        .startswith("python -m diverge_notifications listen: error: ")
    )


def test_the_wheel_carries_the_license_and_the_metadata(tmp_path: Path) -> None:
    setuptools = pytest.importorskip("setuptools")
    if int(setuptools.__version__.split(".")[0]) < 77:
        pytest.skip(f"setuptools {setuptools.__version__} is older than 77 (the 'dev' extra's)")
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        copy(ROOT / name, source / name)
    build = subprocess.run(
        [*PIP_WHEEL, "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=6 * HANG_GUARD,
    )
    output = build.stdout + build.stderr
    assert build.returncode == 0, output
    warned = [
        line
        for line in output.splitlines()
        if "deprecat" in line.lower() and "licen" in line.lower()
    ]
    assert not warned
    (wheel,) = (tmp_path / "dist").glob("diverge_notifications-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (license_name,) = [name for name in names if name.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(license_name) == (ROOT / "LICENSE").read_bytes()
        (metadata_name,) = [name for name in names if name.endswith(".dist-info/METADATA")]
        metadata = HeaderParser().parsestr(archive.read(metadata_name).decode("utf-8"))
        (scripts_name,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
        scripts = archive.read(scripts_name)
    assert "MIT License" in (ROOT / "LICENSE").read_text("utf-8")
    assert metadata["Version"] == diverge_notifications.__version__
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]
    classifiers = metadata.get_all("Classifier") or []
    for minor in range(10, 14):
        assert f"Programming Language :: Python :: 3.{minor}" in classifiers
    assert any(classifier.startswith("Development Status :: ") for classifier in classifiers)
    urls = dict(url.split(", ", 1) for url in metadata.get_all("Project-URL") or [])
    assert set(urls) == {"Homepage", "Documentation", "Source", "Issues"}
    assert b"diverge-notifications = diverge_notifications.__main__:main" in scripts
