"""The house rules of the package, read from its own imports (every ``import`` and ``from ... import``
anywhere in a module, lazy ones inside functions included):

- data flows one way: ``core`` → ``kernels`` → ``embed``/``llm``/``store`` (siblings that never import each
  other) → ``methods`` → what the facades read through (``context``) and the facades (``memory``, ``answer``,
  ``dump``, ``reembed``, ``experience``) → ``client``,
  ``service``, ``bench``, ``deploy`` (the cluster's configuration files) → ``cli``; nothing imports a layer above its own, and nothing imports ``cli``;
- a method never imports another method (only what the methods share) and never touches SQL;
- no module imports a private name (``_x``) of another;
- the import graph has no circle;
- the top of the package holds at most eight modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import memgas

PACKAGE = Path(memgas.__file__).parent

#: Each layer's rank (a module may import its own rank or below); top-level modules by name.
RANKS = {"core": 0, "kernels": 1, "embed": 2, "llm": 2, "store": 2, "methods": 3, "answer": 4, "memory": 4, "context": 4,
         "async_memory": 4, "api": 4, "sessions": 4, "integrations": 5,
         "dump": 4, "reembed": 4, "experience": 4, "client": 5, "service": 5, "bench": 5, "deploy": 5, "cli": 6, "__init__": 7}
#: Sibling providers that must not import each other.
SIBLINGS = {"embed", "llm", "store"}
#: What the methods share; every other module of ``methods/`` is one method.
METHOD_SHARED = {"__init__", "base", "index", "ranking", "units", "llm_units", "rerank", "decompose", "trees", "derived",
                 "qa_memory"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str) -> list[tuple[str, str | None]]:
    """``(module, imported name or None)`` for every memgas import of module ``name``, resolved to modules."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names if a.name.split(".")[0] == "memgas"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            if base.split(".")[0] != "memgas":
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.append((sub, None) if sub in MODULES else (base, alias.name))
    return out


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_module_has_a_layer() -> None:
    assert {_layer(m) for m in MODULES} <= set(RANKS)


def test_no_import_runs_up_a_layer_or_into_the_cli() -> None:
    bad = []
    for name in MODULES:
        for target, _ in _imports(name):
            here, there = _layer(name), _layer(target)
            if there == "cli" and here != "cli":
                bad.append(f"{name} -> {target} (nothing imports the cli)")
            elif RANKS[there] > RANKS[here] and not (here == "__init__"):
                bad.append(f"{name} -> {target}")
            elif here in SIBLINGS and there in SIBLINGS and here != there:
                bad.append(f"{name} -> {target} (sibling providers)")
    assert bad == []


def test_a_method_imports_no_other_method_and_no_sql() -> None:
    bad = []
    for name in MODULES:
        parts = name.split(".")
        if parts[1:2] != ["methods"] or len(parts) < 3 or parts[2] in METHOD_SHARED:
            continue
        for target, _ in _imports(name):
            tparts = target.split(".")
            if tparts[1:2] == ["methods"] and len(tparts) > 2 and tparts[2] not in METHOD_SHARED:
                bad.append(f"{name} -> {target}")
            if target.startswith(("memgas.store.sql", "memgas.store.sqlite", "memgas.store.postgres")):
                bad.append(f"{name} -> {target} (SQL)")
        assert "sqlite3" not in MODULES[name].read_text(encoding="utf-8"), name
    assert bad == []


def test_no_private_name_crosses_a_module() -> None:
    bad = [f"{name} imports {target}.{imported}" for name in MODULES for target, imported in _imports(name)
           if imported and imported.startswith("_") and not imported.startswith("__") and target != name]
    assert bad == []


def test_the_import_graph_has_no_circle() -> None:
    graph = {name: {t if t in MODULES else t.rpartition(".")[0] for t, _ in _imports(name)} & set(MODULES) - {name}
             for name in MODULES}
    # a package's __init__ re-exporting its submodules is the package's face, not a dependency of theirs
    state: dict[str, int] = {}
    circle: list[str] = []

    def visit(node: str, path: list[str]) -> bool:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                circle.extend(path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt])
                return True
            if nxt not in state and visit(nxt, path + [nxt]):
                return True
        state[node] = 2
        return False

    for start in sorted(graph):
        if start not in state and visit(start, [start]):
            break
    assert circle == []


def test_the_package_top_holds_only_the_facades_and_folders() -> None:
    top = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert len(top) <= 8, top
