"""The TypeScript client (``clients/typescript``): its checked-in OpenAPI schema and generated types are the server's
(so the client cannot drift from it), and its own Node test suite passes against a live ``memgas serve``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memgas.service.openapi import schema_text

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "typescript"
NPM = shutil.which("npm")


def test_the_checked_in_schema_is_the_servers() -> None:
    assert (CLIENT / "openapi.json").read_text(encoding="utf-8") == schema_text(), (
        "clients/typescript is out of date with the server: run `npm run generate` there")


def _npm(*args: str) -> subprocess.CompletedProcess[str]:
    if NPM is None:
        pytest.skip("npm is not installed")
    if not (CLIENT / "node_modules" / "openapi-typescript").is_dir():
        pytest.skip("the client's Node packages are not installed (cd clients/typescript && npm ci)")
    env = {**os.environ, "MEMGAS_PYTHON": sys.executable}
    return subprocess.run([NPM, *args], cwd=CLIENT, env=env, capture_output=True, text=True, timeout=600)


def test_the_generated_types_are_up_to_date() -> None:
    done = _npm("run", "check-schema")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_clients_node_suite_passes_against_a_live_server() -> None:
    done = _npm("test")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "# fail 0" in done.stdout and "# pass 3" in done.stdout
