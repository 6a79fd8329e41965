"""The docs' generated parts, kept in their pages so that they read on GitHub too, and checked against the code.

A generated part sits between ``<!-- generated: NAME -->`` and ``<!-- end generated: NAME -->``:

* ``api``: the rows of the declared API (``memgas.api.reference_markdown``), in ``docs/reference/api.md``;
* ``cli``: the command line's reference (``memgas.cli.reference.markdown``), in ``docs/reference/cli.md``;
* ``mcp``: the MCP tools as a server lists them (``memgas.service.mcp.tools_markdown``);
* ``deploy``: the cluster's configuration files (``memgas.deploy.files_markdown``).

``python scripts/references.py`` writes them anew; ``python scripts/references.py --check`` changes nothing and
exits 1 naming the pages whose parts are stale (``tests/system/test_docs.py`` runs the check, as sqlite-utils checks
its CLI reference with cog).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

_PART = re.compile(r"(<!-- generated: (\w+) -->\n)(.*?)(<!-- end generated: \2 -->)", re.S)


def _api() -> str:
    from memgas.api import reference_markdown

    return reference_markdown()


def _cli() -> str:
    from memgas.cli.reference import markdown

    return markdown()


def _mcp() -> str:
    from memgas.service.mcp import tools_markdown

    return tools_markdown()


def _deploy() -> str:
    from memgas.deploy import files_markdown

    return files_markdown()


#: What makes each named part.
GENERATORS: dict[str, Callable[[], str]] = {"api": _api, "cli": _cli, "mcp": _mcp, "deploy": _deploy}


def filled(text: str, made: dict[str, str] | None = None) -> str:
    """``text`` with each generated part as its generator makes it now (``made`` caches what was made).

    Raises:
        KeyError: a part names no generator.
    """
    made = {} if made is None else made

    def fill(m: re.Match[str]) -> str:
        name = m.group(2)
        if name not in made:
            made[name] = GENERATORS[name]().strip("\n") + "\n"
        return m.group(1) + made[name] + m.group(4)

    return _PART.sub(fill, text)


def stale(pages: list[Path] | None = None) -> list[str]:
    """The pages (relative to the root) whose generated parts differ from what the code makes now."""
    made: dict[str, str] = {}
    pages = sorted(DOCS.rglob("*.md")) if pages is None else pages
    return [p.relative_to(ROOT).as_posix() for p in pages if filled(text := p.read_text("utf-8"), made) != text]


def main(argv: list[str] | None = None) -> int:
    """Write the generated parts, or with ``--check`` name the stale pages (exit 1)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a page is stale")
    args = parser.parse_args(argv)
    old = stale()
    if args.check:
        for page in old:
            print(f"{page}: its generated parts are stale: run python scripts/references.py", file=sys.stderr)
        return 1 if old else 0
    for page in old:
        path = ROOT / page
        path.write_text(filled(path.read_text("utf-8")), "utf-8")
        print(f"wrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
