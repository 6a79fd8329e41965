"""The adapters whose frameworks cannot share the main environment, each tested in an environment of its own that
``scripts/test`` makes: Strands Agents pins ``mcp<2.2`` (memgas's service needs ``mcp>=2.3``) and CrewAI ``openai<3``
(the OpenAI Agents SDK needs ``openai>=3``). This test runs each one's tests there (``strands_loop.py``,
``crewai_loop.py``: the shared scenario inside the framework's loop, and the docs' example) and fails, saying how to
make the environment, where it is missing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent


@pytest.mark.slow
@pytest.mark.parametrize("framework,tests,passed", [("strands", "strands_loop.py", 2), ("crewai", "crewai_loop.py", 3)])
def test_the_adapter_passes_in_its_own_environment(framework: str, tests: str, passed: int) -> None:
    python = ROOT / f".venv-{framework}" / "bin" / "python"
    if not python.exists():
        pytest.fail(f"no .venv-{framework}: scripts/test makes it (python3 -m venv .venv-{framework} && "
                    f".venv-{framework}/bin/pip install -e '.[{framework}]' pytest)")
    done = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(HERE / tests)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "VIRTUAL_ENV": str(python.parents[1])})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert f"{passed} passed" in done.stdout and "skipped" not in done.stdout, done.stdout[-2000:]
