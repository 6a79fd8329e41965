"""Each framework extra brings what its documented snippet imports: the snippet's modules are imported as a new
environment holding only ``memgas[EXTRA]`` would import them (``tests/support/extras.py``), in the main environment
and in the frameworks' own. ``pip install -e '.[autogen]'`` once lacked ``openai``, which its snippet's model client
needs (``autogen-ext`` without its ``[openai]`` extra)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support import extras

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "support" / "extras.py"
MAIN = ["langchain", "langgraph", "llamaindex", "autogen", "openai-agents", "pydantic-ai", "adk", "agno"]


def test_every_framework_section_of_the_guide_has_a_snippet_and_is_checked() -> None:
    found = extras.snippets(extras.GUIDE.read_text(encoding="utf-8"))
    assert set(found) == {*MAIN, "strands", "crewai"} and all(found.values())


@pytest.mark.parametrize("extra,python", [*((e, Path(sys.executable)) for e in MAIN),
                                          ("strands", ROOT / ".venv-strands" / "bin" / "python"),
                                          ("crewai", ROOT / ".venv-crewai" / "bin" / "python")])
def test_each_extra_brings_what_its_snippet_imports(extra: str, python: Path) -> None:
    if not python.exists():
        pytest.fail(f"no {python.parents[1].name}: scripts/test makes it")
    done = subprocess.run([str(python), str(SCRIPT), extra], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "", done.stdout + done.stderr[-2000:]


def test_the_check_finds_a_package_the_extra_does_not_bring() -> None:
    """What autogen-ext brings without its [openai] extra lacks openai; with it, openai is there."""
    assert "openai" not in extras.closure(["autogen-ext>=0.7"])
    assert {"openai", "autogen-core"} <= extras.closure(["autogen-ext[openai]>=0.7"])
    assert "openai" in extras.closure(["memgas[autogen]"]) and "langgraph" not in extras.closure(["memgas[autogen]"])
    code = "import os\nfrom autogen_ext.models.openai import X\nimport memgas\nfrom . import y\n"
    assert extras.imported(code) == ["autogen_ext.models.openai"]
    blocked = subprocess.run([sys.executable, "-c", (
        "import sys; sys.path.insert(0, 'tests/support'); import extras, importlib\n"
        "sys.meta_path.insert(0, extras._OnlyBrought(extras.closure(['autogen-ext>=0.7'])))\n"
        "importlib.import_module('autogen_ext.models.openai')")], cwd=ROOT, capture_output=True, text=True,
        timeout=300)
    assert blocked.returncode == 1 and "No module named 'openai'" in blocked.stderr
