"""The import paths of the release before the layered packages keep working for one release: ``memgas.model``
(a shim that warns), ``memgas.embed`` and ``memgas.llm`` (package faces with every name their single modules
had), the names of ``memgas`` and the ``memgas`` entry point."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

import memgas
from memgas.core import errors, types, validate

#: Every public name the single modules ``memgas.embed`` and ``memgas.llm`` had.
OLD_EMBED = ["Embedder", "OnnxMiniLMEmbedder", "SentenceTransformerEmbedder", "OpenAIEmbedder", "EmbeddingCache",
             "CachedEmbedder", "MissingDependencyError", "get_embedder", "default_cache_path", "l2_normalise"]
OLD_LLM = ["ChatModel", "Completion", "Usage", "LLMError", "OpenAIChat", "ResponseCache", "LLM", "get_llm",
           "default_llm_cache_path", "track_usage", "strip_think", "extract_json", "validate_json"]
#: A sample of what ``memgas.model`` held: types, errors, limits, validation.
OLD_MODEL = ["Hit", "TurnHit", "Session", "Message", "Unit", "Edge", "GRANULARITIES", "group_turns", "MemgasError",
             "InvalidInputError", "NotFoundError", "RateLimitedError", "MAX_K", "MAX_QUERY_CHARS", "ID_CHAR",
             "check_id", "check_k", "parse_timestamp", "naive_utc", "make_session"]


def test_the_model_shim_warns_and_hands_out_the_same_objects() -> None:
    code = ("import warnings\nwith warnings.catch_warnings(record=True) as caught:\n"
            "    warnings.simplefilter('always')\n    import memgas.model\n"
            "print(caught[0].category.__name__, caught[0].message)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.startswith("DeprecationWarning memgas.model is deprecated")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import memgas.model as model
    for name in OLD_MODEL:
        new = next(getattr(m, name) for m in (types, errors, validate) if hasattr(m, name))
        assert getattr(model, name) is new, name
    assert set(model.__all__) == set(types.__all__) | set(errors.__all__) | set(validate.__all__)


@pytest.mark.parametrize(("package", "names"), [("memgas.embed", OLD_EMBED), ("memgas.llm", OLD_LLM)])
def test_the_provider_packages_keep_every_old_name(package: str, names: list[str]) -> None:
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
