"""The ``>>>`` examples of every docstring run, so the documentation cannot drift from the code (the docs site's
examples run in ``test_docs.py``).

Each file's examples run in a fresh temporary folder (they may write ``memory.db``) with a private cache folder.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

import memgas

PACKAGE = Path(memgas.__file__).parent
#: Every module whose source holds an example.
WITH_EXAMPLES = sorted(
    ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
    for p in PACKAGE.rglob("*.py") if ">>>" in p.read_text(encoding="utf-8"))


@pytest.fixture(autouse=True)
def _scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMGAS_CACHE_DIR", str(tmp_path / "cache"))


def test_modules_with_examples_are_found() -> None:
    assert {"memgas", "memgas.kernels.fusion", "memgas.kernels.ppr"} <= set(WITH_EXAMPLES)


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_docstring_examples_run(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:  # an adapter whose framework is an optional extra
        if (exc.name or "").split(".")[0] == "memgas":
            raise
        pytest.skip(f"{name} needs {exc.name}, which is not installed")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
