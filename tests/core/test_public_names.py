"""The public names: the provider packages' faces (``memgas.embed``, ``memgas.llm``), the names of ``memgas`` and the
``memgas`` entry point."""

from __future__ import annotations

import subprocess
import sys

import pytest

import memgas
from memgas.core import errors, types

#: The public names of the provider packages.
EMBED = ["Embedder", "OnnxMiniLMEmbedder", "SentenceTransformerEmbedder", "OpenAIEmbedder", "EmbeddingCache",
             "CachedEmbedder", "MissingDependencyError", "get_embedder", "default_cache_path", "l2_normalise"]
LLM = ["ChatModel", "Completion", "Usage", "LLMError", "OpenAIChat", "ResponseCache", "LLM", "get_llm",
           "default_llm_cache_path", "track_usage", "strip_think", "extract_json", "validate_json"]
@pytest.mark.parametrize(("package", "names"), [("memgas.embed", EMBED), ("memgas.llm", LLM)])
def test_the_provider_packages_export_their_names(package: str, names: list[str]) -> None:
    module = __import__(package, fromlist=["_"])
    assert set(names) <= set(module.__all__) and set(names) <= set(dir(module))
    for name in names:
        value = getattr(module, name)
        assert getattr(value, "__name__", name) == name or name in ("ChatModel", "Embedder")


def test_the_errors_are_one_hierarchy_whatever_the_path() -> None:
    from memgas.embed import MissingDependencyError
    from memgas.llm import LLMError

    assert MissingDependencyError is errors.MissingDependencyError and LLMError is errors.LLMError
    assert memgas.InvalidInputError is errors.InvalidInputError and memgas.Hit is types.Hit


def test_every_public_name_of_memgas_resolves() -> None:
    for name in memgas.__all__:
        assert getattr(memgas, name) is not None, name
    assert memgas.__version__ == __import__("importlib.metadata").metadata.version("memgas")


def test_the_entry_point_is_memgas_cli_main() -> None:
    from importlib.metadata import entry_points

    (point,) = [p for p in entry_points(group="console_scripts") if p.name == "memgas"]
    assert point.value == "memgas.cli:main"
    assert point.load() is __import__("memgas.cli", fromlist=["main"]).main
    done = subprocess.run([sys.executable, "-m", "memgas.cli", "--help"], capture_output=True, text=True, check=True)
    assert "usage: memgas" in done.stdout
