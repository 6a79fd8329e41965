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
from memgas.service.typescript import api_declaration

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "typescript"
NPM = shutil.which("npm")


def test_the_checked_in_schema_is_the_servers() -> None:
    assert (CLIENT / "openapi.json").read_text(encoding="utf-8") == schema_text(), (
        "clients/typescript is out of date with the server: run `npm run generate` there")


def test_the_checked_in_api_is_the_declarations() -> None:
    assert (CLIENT / "src" / "api.ts").read_text(encoding="utf-8") == api_declaration(), (
        "clients/typescript/src/api.ts is out of date with memgas.api: run `npm run generate` there")


def test_the_compiler_refuses_a_client_that_lacks_a_declared_call(tmp_path: Path) -> None:
    """The client implements the generated ``MemoryApi`` and takes each call's options as declared there: drop a
    call, or read an option by another name, and tsc fails."""
    _npm("--version")  # skips, saying why, without npm or the client's packages
    source = (CLIENT / "src" / "index.ts").read_text(encoding="utf-8")
    for old, new, error in (
            ("  async users(): Promise<UserRow[]> {", "  async everyone(): Promise<UserRow[]> {",
             "incorrectly implements interface 'MemoryApi'"),
            ("min_score: options.minScore ?? 0,", "min_score: options.minimumScore ?? 0,",
             "Property 'minimumScore' does not exist")):
        shutil.copytree(CLIENT / "src", tmp_path / "src", dirs_exist_ok=True)
        shutil.copy(CLIENT / "tsconfig.json", tmp_path / "tsconfig.json")
        (tmp_path / "node_modules").unlink(missing_ok=True)
        (tmp_path / "node_modules").symlink_to(CLIENT / "node_modules")
        assert old in source
        (tmp_path / "src" / "index.ts").write_text(source.replace(old, new), encoding="utf-8")
        done = subprocess.run([str(CLIENT / "node_modules" / ".bin" / "tsc"), "-p", str(tmp_path), "--noEmit"],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode != 0 and error in done.stdout, done.stdout


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
