"""Each framework's extra installs what its documented example imports: for every Python example of the frameworks
guide, the distributions that provide its imports (other than memgas) are named by the extra of the adapter it uses
(``memgas.integrations.X`` → ``memgas[x]``)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "frameworks.md"
#: The adapter module each extra belongs to, where the names differ.
EXTRA = {"openai_agents": "openai-agents", "pydantic_ai": "pydantic-ai"}
#: Examples that run in an environment of their own (test_own_environments.py installs exactly their extra there).
OWN_ENVIRONMENT = {"strands", "crewai"}


def _extra(name: str) -> set[str]:
    """The distributions ``memgas[name]`` names (read from pyproject.toml, what an install reads)."""
    project = tomllib.loads((GUIDE.parents[2] / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in project["optional-dependencies"][name]}


def examples() -> list[tuple[str, set[str]]]:
    """(the adapter module, the top-level modules it imports besides memgas) for each example of the guide."""
    out = []
    for block in re.findall(r"^```python\n(.*?)^```", GUIDE.read_text(encoding="utf-8"), re.S | re.M):
        imported = {n.module if isinstance(n, ast.ImportFrom) else a.name
                    for n in ast.walk(ast.parse(block)) if isinstance(n, (ast.Import, ast.ImportFrom))
                    for a in (n.names if isinstance(n, ast.Import) else [None]) if (n.module if isinstance(
                        n, ast.ImportFrom) else a.name)}
        adapters = {m.split(".")[2] for m in imported if m.startswith("memgas.integrations.")}
        if adapters:
            (adapter,) = adapters
            out.append((adapter, {m for m in imported if not m.startswith("memgas") and m != "asyncio"}))
    return out


def test_every_framework_example_is_found() -> None:
    assert {a for a, _ in examples()} == {"langchain", "langgraph", "llamaindex", "autogen", "openai_agents",
                                          "pydantic_ai", "adk", "agno", "strands", "crewai"}


@pytest.mark.parametrize("adapter,imported", [e for e in examples() if e[0] not in OWN_ENVIRONMENT],
                         ids=[a for a, _ in examples() if a not in OWN_ENVIRONMENT])
def test_the_extra_names_what_the_example_imports(adapter: str, imported: set[str]) -> None:
    wanted = _extra(EXTRA.get(adapter, adapter))
    provided = importlib.metadata.packages_distributions()
    for module in imported:
        top = module.split(".")[0]
        dists = {d.lower() for d in provided.get(top, [])}
        if top == "google":  # a namespace shared by many distributions: the one that holds the submodule
            dists = {d.lower() for d in provided.get(top, []) if d.lower().replace("_", "-") == "google-adk"}
        assert dists & wanted, f"memgas[{EXTRA.get(adapter, adapter)}] does not install {module} ({sorted(dists)})"
