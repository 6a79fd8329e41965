"""The documentation site (``docs/``, ``mkdocs.yml``): it builds with ``mkdocs build --strict``, its references name
every command, flag, public name and declared call, its pages request nothing from outside in a real Chromium, every
Python example on it runs, and every ``memgas`` command line in it parses.

The examples run page by page (a page's blocks in order, one script, in a fresh folder), against real parts: a live
``memgas serve`` for the client examples, a PostgreSQL server for the PostgreSQL page, and a loopback server speaking
the OpenAI protocol where an example names an LLM (it answers each JSON-schema request with a valid instance). The
benchmark log (``docs/benchmarks/log.md``) is a record of what was run, with the scripts as they were run there; it is
left out of the examples.
"""

from __future__ import annotations

import html
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

import memgas
from memgas.api import KnowledgeGraphAPI, MemoryAPI, calls
from memgas.cli.commands import build_parser
from memgas.cli.reference import commands
from support.live_server import LiveServer, make_key, start_server
from support.openai_stub import OpenAIStub

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
#: The pages whose examples run (every page but the log of past runs).
PAGES = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if p.name != "log.md")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def built(site: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built strictly (a broken link, a missing reference or a docstring mkdocstrings cannot read fails)."""
    out = tmp_path_factory.mktemp("site")
    built(out)
    return out


def html_text(page_html: str) -> str:
    """A page's text, tags removed and entities read."""
    return html.unescape(re.sub(r"<[^>]+>", "", page_html))


def text_of(page: Path) -> str:
    """A built page's text."""
    return html_text(page.read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------- the references


def test_every_command_and_argument_has_a_help_text() -> None:
    missing = [name for name, help_text, _ in commands() if not help_text.strip()]
    missing += [f"{name} {a.option_strings or a.dest}" for name, _, parser in commands() for a in parser._actions
                if not (a.help or "").strip()]
    assert missing == []


def missing_from_cli_reference(html: str) -> list[str]:
    """The commands without a section, and the ``command flag`` pairs not in their section, of a built CLI page."""
    text = html_text(html)
    missing = []
    for name, _, parser in commands():
        if f'id="{name.replace(" ", "-")}"' not in html:
            missing.append(name)
            continue
        section = text.split(name, 1)[1]
        missing += [f"{name} {flag}" for action in parser._actions for flag in action.option_strings
                    if flag not in section]
    return missing


def test_the_cli_reference_names_every_command_and_flag(site: Path) -> None:
    listed = list(commands())
    assert len(listed) >= 30 and any(name == "memgas keys create" for name, _, _ in listed)
    assert missing_from_cli_reference((site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")) == []


def test_the_api_reference_names_every_public_name_and_declared_call(site: Path) -> None:
    page = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    for name in memgas.__all__:
        if name != "__version__":
            assert f'id="memgas.{name}"' in page or f'id="memgas.core.errors.{name}"' in page, name
    text = text_of(site / "reference" / "api" / "index.html")
    for api, prefix in ((MemoryAPI, ""), (KnowledgeGraphAPI, "kg.")):
        for name, _ in calls(api):
            assert f"{prefix}{name}(" in text, f"the declared call {prefix}{name} is not in the API table"
            assert f'id="memgas.api.{api.__name__}.{name}"' in page


def test_the_mcp_guide_lists_every_served_tool_with_its_parameters(site: Path) -> None:
    import asyncio

    from memgas.service.mcp import build_server

    page = (site / "guides" / "mcp-inspector" / "index.html").read_text(encoding="utf-8")
    rows = {html_text(cells[0]): html_text(cells[1]) for row in re.findall(r"<tr>(.*?)</tr>", page, re.S)
            for cells in [re.findall(r"<td>(.*?)</td>", row, re.S)] if len(cells) == 3}
    with memgas.Memory(None) as mem:
        tools = asyncio.run(build_server(mem).list_tools())
    assert {"get_timeline", "recall_principles", "match_templates"} <= {t.name for t in tools}
    for tool in tools:
        params = [p for p in tool.input_schema["properties"] if p != "format"]
        assert tool.name in rows and all(p in rows[tool.name].split(", ") for p in params), tool.name


def test_a_command_left_out_of_the_reference_fails_the_check(site: Path) -> None:
    """The check above bites: the same page without one command's section misses that command."""
    html = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    cut = re.sub(r'<h2 id="memgas-keys-revoke".*?(?=<h2 )', "", html, flags=re.S)
    assert cut != html and missing_from_cli_reference(cut) == ["memgas keys revoke"]


# ----------------------------------------------------------------------------- offline


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def served_site(site: Path) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.slow
def test_the_site_requests_nothing_from_outside(site: Path, served_site: str) -> None:
    """Every page in a real Chromium: no request leaves the loopback server, no script error, and the search works
    (its index is the site's own)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    if CHROMIUM is None:
        pytest.skip("no chromium binary (Debian: apt-get install chromium)")
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("index.html"))
    assert len(pages) >= len(PAGES)
    outside: list[str] = []
    errors: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()

        def guard(route: Any) -> None:
            if route.request.url.startswith((served_site, "data:", "blob:")):
                route.continue_()
            else:
                outside.append(route.request.url)
                route.abort()

        page.route("**/*", guard)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        for path in pages:
            page.goto(f"{served_site}/{path}", wait_until="networkidle")
        page.goto(f"{served_site}/index.html", wait_until="networkidle")
        page.keyboard.press("/")  # Material's search shortcut
        page.keyboard.type("PageRank")
        page.locator(".md-search-result__item").first.wait_for(timeout=15_000)
        browser.close()
    assert outside == [] and errors == []


# ----------------------------------------------------------------------------- the examples


def source_of(page: str) -> str:
    """A page's Markdown with the root files it includes (the README on the home page, CHANGELOG.md...) in place."""
    text = (DOCS / page).read_text(encoding="utf-8")
    return re.sub(r"<!-- include: ([\w.-]+) -->", lambda m: (ROOT / m.group(1)).read_text(encoding="utf-8"), text)


def blocks(page: str, language: str) -> list[str]:
    """The fenced code blocks of one language on a page, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```", source_of(page), re.S | re.M)


def instance(schema: dict[str, Any]) -> Any:
    """A small value valid for a JSON schema (the scripted model's answer to a structured request)."""
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        props = schema.get("properties", {})
        return {k: instance(v) for k, v in props.items()}
    if kind == "array":
        return [instance(schema.get("items", {"type": "string"}))] * max(1, schema.get("minItems", 1))
    if kind == "integer" or kind == "number":
        return schema.get("minimum", 1)
    if kind == "boolean":
        return True
    return "From memory: the answer."


def structured(body: dict[str, Any]) -> str:
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema")
    return json.dumps(instance(schema)) if schema else "From memory: the answer."


@pytest.fixture(scope="module")
def llm_stub() -> Iterator[OpenAIStub]:
    with OpenAIStub(structured) as stub:
        yield stub


@pytest.fixture(scope="module")
def docs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("docs-server")
    db = tmp / "served.db"
    key = make_key(db)
    server = start_server(db, tmp=tmp)
    server.keys = {"admin": key}
    yield server
    server.stop()


def test_the_pages_with_examples_are_found() -> None:
    assert {"index.md", "quickstart.md", "guides/live.md", "guides/frameworks.md"} <= set(PAGES)
    assert all(blocks(page, "python") for page in ("index.md", "quickstart.md", "guides/service.md"))


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p, "python") or blocks(p, "pycon")])
def test_every_python_example_runs(page: str, tmp_path: Path, llm_stub: OpenAIStub, docs_server: LiveServer,
                                   request: pytest.FixtureRequest) -> None:
    env = {**os.environ, "MEMGAS_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_BASE_URL": llm_stub.base_url,
           "OPENAI_API_KEY": "docs-example", "OPENAI_AGENTS_DISABLE_TRACING": "1",
           "MEMGAS_URL": docs_server.url, "MEMGAS_API_KEY": docs_server.keys["admin"]}
    if page == "guides/postgres.md":
        env["MEMGAS_DB"] = request.getfixturevalue("pg_url")
    # Strands pins mcp<2.2 and CrewAI openai<3, which memgas's service and the Agents SDK cannot share: their blocks
    # run in their own environments (tests/integrations/strands_loop.py and crewai_loop.py).
    # Pasted as a newcomer pastes them: the page's blocks in order, into one fresh folder, then all of it again (a
    # script run twice), so a missing import, a block that leans on another page or an id that collides fails here.
    source = "\n".join(b for b in blocks(page, "python") if "from strands" not in b and "from crewai" not in b)
    for attempt in ("first", "second") if source else ():
        ran = subprocess.run([sys.executable, "-c", source], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=600)
        assert ran.returncode == 0, f"{page}, {attempt} run:\n{ran.stderr[-3000:]}"
    for example in blocks(page, "pycon") * 2:  # twice too, in the same folder
        script = "import doctest, sys\n" \
                 f"r = doctest.run_docstring_examples({example!r}, {{}}, optionflags=doctest.ELLIPSIS | " \
                 "doctest.NORMALIZE_WHITESPACE)\n"
        ran = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=300)
        assert ran.returncode == 0 and "Failed example" not in ran.stdout, f"{page}:\n{ran.stdout[-3000:]}"


# ----------------------------------------------------------------------------- the command lines


def command_lines() -> list[tuple[str, str]]:
    """Every ``memgas ...`` line of the docs' and the README's shell blocks, as ``(where, line)``."""
    found = []
    sources = {p: source_of(p) for p in PAGES}
    sources["clients/typescript/README.md"] = (ROOT / "clients/typescript/README.md").read_text(encoding="utf-8")
    for where, text in sources.items():
        for block in re.findall(r"^```(?:bash|sh|console)\n(.*?)^```", text, re.S | re.M):
            for line in block.replace("\\\n", " ").splitlines():
                for part in line.split(" ; "):
                    part = part.split("  #")[0].strip()
                    if part.startswith(("memgas ", ".venv/bin/memgas ")):
                        found.append((where, part))
    return found


def parsed(line: str) -> None:
    """Parse one documented command line with the real parser (``[...]`` optional parts taken, ``a|b`` the first)."""
    words = [w.split("|")[0] if "|" in w and not w.startswith(("'", '"')) else w
             for w in shlex.split(line.replace("[", "").replace("]", ""))]
    build_parser().parse_args(words[1:])


def test_every_memgas_command_line_in_the_docs_parses() -> None:
    lines = command_lines()
    assert len(lines) >= 25
    bad = []
    for where, line in lines:
        try:
            parsed(line)
        except SystemExit:
            bad.append(f"{where}: {line}")
    assert bad == []


def test_a_renamed_flag_in_the_docs_fails_to_parse() -> None:
    with pytest.raises(SystemExit):
        parsed("memgas search 'where?' --user alice --min-relevance 0.3")


# ----------------------------------------------------------------------------- the references kept in the pages


def references() -> Any:
    """``scripts/references.py`` as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("references", ROOT / "scripts" / "references.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_references_kept_in_the_pages_are_current() -> None:
    """The pages hold what the code makes now (so they read on GitHub as on the site); a stale page names itself."""
    refs = references()
    assert refs.stale() == [], "run: python scripts/references.py"
    for page, part in (("reference/api.md", "api"), ("reference/cli.md", "cli"), ("guides/mcp-inspector.md", "mcp"),
                       ("guides/cluster.md", "deploy")):
        text = (DOCS / page).read_text(encoding="utf-8")
        assert f"<!-- generated: {part} -->" in text and f"<!-- end generated: {part} -->" in text
    cli = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    assert "## memgas keys revoke" in cli and "`--force`" in cli.split("## memgas backup", 1)[1].split("## ", 1)[0]
    assert "| `search(query, *, user_id" in (DOCS / "reference" / "api.md").read_text(encoding="utf-8")


def test_a_page_whose_generated_part_falls_behind_the_code_is_stale(tmp_path: Path) -> None:
    refs = references()
    current = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    behind = current.replace("| `--force` |", "| `--forced` |", 1)  # a flag renamed in the code, not in the page
    page = tmp_path / "docs" / "cli.md"
    page.parent.mkdir()
    page.write_text(behind, encoding="utf-8")
    refs.ROOT = tmp_path
    assert behind != current and refs.stale([page]) == ["docs/cli.md"] and refs.filled(behind) == current
    with pytest.raises(KeyError):
        refs.filled("<!-- generated: nothing -->\n<!-- end generated: nothing -->")
