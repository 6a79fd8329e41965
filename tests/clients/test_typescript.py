"""The TypeScript client (``clients/typescript``): its checked-in OpenAPI schema and generated types are the server's
(so the client cannot drift from it), its own Node test suite passes against a live ``memgas serve``, and the package
``npm pack`` makes installs into an empty folder, where its README's example runs as written."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memgas.service.openapi import schema_text
from memgas.service.typescript import api_declaration
from support.live_server import make_key, start_server

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "typescript"
NPM = shutil.which("npm")


def test_the_checked_in_schema_is_the_servers() -> None:
    assert (CLIENT / "openapi.json").read_text(encoding="utf-8") == schema_text(), (
        "clients/typescript is out of date with the server: run `npm run generate` there")


def test_the_checked_in_api_is_the_declarations() -> None:
    assert (CLIENT / "src" / "api.ts").read_text(encoding="utf-8") == api_declaration(), (
        "clients/typescript/src/api.ts is out of date with memgas.api: run `npm run generate` there")


@pytest.mark.slow
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
    # The scripts find this Python by themselves when it is the checkout's .venv; any other (a CI image's) is named.
    env = {**os.environ}
    if Path(sys.prefix).resolve() != (CLIENT.parents[1] / ".venv").resolve():
        env["MEMGAS_PYTHON"] = sys.executable
    return subprocess.run([NPM, *args], cwd=CLIENT, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_the_generated_types_are_up_to_date() -> None:
    done = _npm("run", "check-schema")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_the_clients_node_suite_passes_against_a_live_server() -> None:
    done = _npm("test")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "# fail 0" in done.stdout and "# pass 5" in done.stdout  # the client (3), the AI SDK and Mastra adapters


def test_the_scripts_find_the_projects_python_without_being_told() -> None:
    """``npm test`` and ``npm run generate`` need no ``MEMGAS_PYTHON`` in a checkout set up by the README."""
    if NPM is None:
        pytest.skip("npm is not installed")
    env = {k: v for k, v in os.environ.items() if k != "MEMGAS_PYTHON"}
    found = subprocess.run(["node", "--input-type=module", "-e",
                            'import { python } from "./scripts/python.mjs"; console.log(python);'],
                           cwd=CLIENT, env=env, capture_output=True, text=True, timeout=60)
    venv = CLIENT.parents[1] / ".venv" / "bin" / "python"
    assert found.stdout.strip() == (str(venv) if venv.exists() else "python3"), found.stderr


def test_the_readme_example_is_the_shipped_example() -> None:
    readme = (CLIENT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```js\n(.*?)```", readme, re.S)
    assert block and block.group(1) == (CLIENT / "example.mjs").read_text(encoding="utf-8")
    assert "README.md" in json.loads((CLIENT / "package.json").read_text())["files"]


@pytest.mark.slow
def test_the_packed_package_installs_into_an_empty_folder_and_its_example_runs(tmp_path: Path) -> None:
    packed = tmp_path / "packed"
    packed.mkdir()
    done = _npm("pack", "--pack-destination", str(packed))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (tarball,) = packed.glob("memgas-client-*.tgz")
    app = tmp_path / "app"
    app.mkdir()
    (app / "package.json").write_text('{"name": "app", "private": true, "type": "module"}', encoding="utf-8")
    installed = subprocess.run([NPM, "install", "--offline", "--no-audit", "--no-fund", str(tarball)], cwd=app,
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-2000:]
    package = app / "node_modules" / "memgas-client"
    assert {p.name for p in package.iterdir()} == {"dist", "README.md", "example.mjs", "package.json"}
    shutil.copy(package / "example.mjs", app / "example.mjs")

    db = tmp_path / "memory.db"
    key = make_key(db)
    server = start_server(db, tmp=tmp_path)
    try:
        ran = subprocess.run(["node", "example.mjs"], cwd=app, capture_output=True, text=True, timeout=120,
                             env={**os.environ, "MEMGAS_URL": server.url, "MEMGAS_API_KEY": key})
    finally:
        server.stop()
    assert ran.returncode == 0, ran.stderr[-2000:]
    lines = ran.stdout.splitlines()
    assert lines[0] == "gym user: My locker code is 4512."
    assert "I switched to the evening yoga class." in ran.stdout
    assert "[ 'gym' ]" in ran.stdout and "not found: 404" in ran.stdout
