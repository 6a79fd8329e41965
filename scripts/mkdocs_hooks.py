"""mkdocs hooks: the included parts of the docs site, written into its pages as they are built.

``<!-- include: FILE -->`` becomes a file of the repository's root (BENCHMARKS.md, CHANGELOG.md), its links rewritten
to point into the site. ``mkdocs.yml`` names this file under ``hooks``. (The parts generated from the code are kept in
the pages themselves, so that they read on GitHub too: ``scripts/references.py``.)
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: The root files the site shows, and the page that shows each (a link to one is a link to its page).
PAGES_OF_ROOT_FILES = {"BENCHMARKS.md": "benchmarks/index.md", "CHANGELOG.md": "changelog.md",
                       "README.md": "index.md", "CONTRIBUTING.md": "development.md"}

_INCLUDE = re.compile(r"<!-- include: ([\w.-]+) -->")
_LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def _site_link(target: str, page: str) -> str | None:
    """The docs-relative form of a repository-relative link, seen from ``page``; ``None`` to leave it as it is."""
    if target in PAGES_OF_ROOT_FILES:
        into = PAGES_OF_ROOT_FILES[target]
    elif target.startswith("docs/"):
        into = target[len("docs/"):]
    else:
        return None
    return posixpath.relpath(into, posixpath.dirname(page) or ".")


def included(name: str, page: str) -> str:
    """The root file ``name`` as a part of ``page``, its links made relative to the page."""
    text = (ROOT / name).read_text(encoding="utf-8")

    def relink(m: re.Match[str]) -> str:
        link = _site_link(m.group(1), page)
        return m.group(0) if link is None else f"]({link}{m.group(2) or ''})"

    return _LINK.sub(relink, text)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace the page's include markers with the files they name."""
    return _INCLUDE.sub(lambda m: included(m.group(1), page.file.src_uri), markdown)
