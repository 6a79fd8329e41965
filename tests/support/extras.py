"""What each framework extra brings against what its documented snippet imports (``docs/guides/frameworks.md``): a
snippet is run by a new user right after ``pip install -e '.[EXTRA]'``, so every package it imports must be in that
extra's requirements, directly or through what they require (an extra of theirs included: ``autogen-ext[openai]``).

Run as a script in an environment that has the extra installed (``python tests/support/extras.py EXTRA``), it
imports each module the snippets import as a new environment with only the extra would (a module of a package the
extra does not bring is not found, whatever else is installed here), prints what fails, one a line, and exits 1 if
anything does; the tests run it in the main environment and in the frameworks' own (``.venv-strands``,
``.venv-crewai``).
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import re
import sys
from collections import deque
from importlib.metadata import PackageNotFoundError, packages_distributions, requires
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "frameworks.md"
_SECTION = re.compile(r"^\*\*[^*]+\*\* \(`memgas\[([\w-]+)\]`", re.M)
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def snippets(text: str) -> dict[str, list[str]]:
    """The Python blocks of the guide by the extra whose section holds them."""
    marks = list(_SECTION.finditer(text))
    out: dict[str, list[str]] = {}
    for mark, after in zip(marks, marks[1:] + [None]):
        part = text[mark.end():after.start() if after is not None else len(text)]
        out.setdefault(mark.group(1), []).extend(_BLOCK.findall(part))
    return out


def imported(code: str) -> list[str]:
    """The modules ``code`` imports (dotted, as written), but the standard library's and memgas's."""
    names: list[str] = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return [n for n in dict.fromkeys(names) if n.split(".")[0] not in sys.stdlib_module_names
            and n.split(".")[0] != "memgas"]


class _OnlyBrought(importlib.abc.MetaPathFinder):
    """Imports as a new environment with only the extra would have them: a top-level module that only distributions
    outside ``brought`` provide is not found (``ModuleNotFoundError``, as without the package)."""

    def __init__(self, brought: set[str]) -> None:
        self.providers = {m: {canonicalize_name(d) for d in ds} for m, ds in packages_distributions().items()}
        self.brought = brought

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        given = self.providers.get(name)
        if "." not in name and given and not given & self.brought:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def closure(requirements: list[str]) -> set[str]:
    """The distributions ``requirements`` bring, each with what it requires in turn (the extras asked for included),
    as installed here; canonical names."""
    seen: set[str] = set()
    queue = deque(Requirement(r) for r in requirements)
    while queue:
        req = queue.popleft()
        name = canonicalize_name(req.name)
        key = name + "".join(f"[{e}]" for e in sorted(req.extras))
        if key in seen:
            continue
        seen.add(key)
        seen.add(name)
        try:
            theirs = requires(req.name) or []
        except PackageNotFoundError:
            continue
        for line in theirs:
            sub = Requirement(line)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in (*req.extras, "")):
                queue.append(sub)
    return {k for k in seen if "[" not in k}


def missing(extra: str) -> list[str]:
    """What fails when the guide's snippets for ``extra`` import their modules with only what ``memgas[extra]``
    brings (see :class:`_OnlyBrought`): one line per module, naming the module not found. Call it in a fresh
    interpreter (the script does): a module imported before is not imported again."""
    code = snippets(GUIDE.read_text(encoding="utf-8")).get(extra)
    if not code:
        return [f"no snippet for memgas[{extra}] in {GUIDE.name}"]
    sys.meta_path.insert(0, _OnlyBrought(closure([f"memgas[{extra}]"])))
    out = []
    for module in dict.fromkeys(m for c in code for m in imported(c)):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            out.append(f"memgas[{extra}]'s snippet imports {module}: {type(exc).__name__}: {exc}")
    return out


if __name__ == "__main__":
    found = [line for extra in sys.argv[1:] for line in missing(extra)]
    print("\n".join(found))
    sys.exit(1 if found else 0)
