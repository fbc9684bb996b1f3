"""Without trustme the TLS tests are skipped, each with the reason, and nothing fails.

trustme is a dev dependency; a checkout installed without it still runs the
suite. The TLS test modules run here in a fresh interpreter where trustme
cannot be imported.
"""

from __future__ import annotations

import re
import subprocess
import sys

from tests.interop import ROOT
from tests.tls import TRUSTME_MISSING

#: The modules whose tests make certificates.
TLS_MODULES = [
    "tests/adapters/test_tls_contexts.py",
    "tests/adapters/test_tls.py",
    "tests/adapters/test_tls_failures.py",
    "tests/cli/test_tls.py",
    "tests/test_tls_interop.py",
]

#: How a module marks all its tests as needing trustme.
MARKED = re.compile(r"^pytestmark = requires_trustme$", re.MULTILINE)

_HIDE_TRUSTME = (
    "import sys; sys.modules['trustme'] = None\n"
    "import pytest\n"
    "raise SystemExit(pytest.main([*sys.argv[1:], '-q', '-rs', '-p', 'no:cacheprovider']))\n"
)


def test_every_module_that_makes_certificates_is_listed() -> None:
    making = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "tests").rglob("test_*.py")
        if MARKED.search(path.read_text(encoding="utf-8"))
    }
    assert making == set(TLS_MODULES)


def test_the_tls_tests_skip_with_their_reason_without_trustme() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _HIDE_TRUSTME, *TLS_MODULES],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    summary = result.stdout.strip().splitlines()[-1]
    assert "skipped" in summary and "passed" not in summary and "failed" not in summary, summary
    skips = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skips and all(line.endswith(TRUSTME_MISSING) for line in skips), skips
