"""Strands Agents in an environment of its own: Strands 1.62 pins ``mcp<2.2`` and memgas's service ``mcp>=2.3``, so
``scripts/test`` installs ``memgas[strands]`` into ``.venv-strands`` and this test runs the Strands tests there
(``strands_loop.py``: the shared scenario inside Strands' agent loop, and the docs' Strands example)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv-strands" / "bin" / "python"


@pytest.mark.slow
def test_the_strands_adapter_passes_in_its_own_environment() -> None:
    if not PYTHON.exists():
        pytest.fail("no .venv-strands: scripts/test makes it (python3 -m venv .venv-strands && "
                    ".venv-strands/bin/pip install -e '.[strands]' pytest)")
    done = subprocess.run([str(PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(Path(__file__).with_name("strands_loop.py"))], cwd=ROOT, capture_output=True,
                          text=True, timeout=900, env={**os.environ, "VIRTUAL_ENV": str(PYTHON.parents[1])})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout and "skipped" not in done.stdout, done.stdout[-2000:]
