"""The test run writes nothing outside its temporary folders: its caches (embeddings, LLM answers, extracted model
files) go to a folder of its own (``tests/conftest.py``), which the commands and servers it starts inherit."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from memgas.core.paths import default_cache_path, default_llm_cache_path


def test_the_run_writes_its_caches_into_a_temporary_folder() -> None:
    temporary = Path(tempfile.gettempdir()).resolve()
    for path in (default_cache_path(), default_llm_cache_path()):
        assert path.resolve().is_relative_to(temporary) and not path.resolve().is_relative_to(Path.home() / ".cache")


def test_a_command_the_tests_start_inherits_the_folder() -> None:
    shown = subprocess.run([sys.executable, "-c", "from memgas.core.paths import default_cache_path as d; print(d())"],
                           capture_output=True, text=True, env={**os.environ}, timeout=60).stdout.strip()
    assert Path(shown) == default_cache_path() and Path(shown).resolve().is_relative_to(Path(tempfile.gettempdir()).resolve())
