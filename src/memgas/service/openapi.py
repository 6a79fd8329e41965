"""``python -m memgas.service.openapi``: print the REST API's OpenAPI schema (what ``/openapi.json`` serves), for
clients generated from it (``clients/typescript``). Sorted keys, so the output changes only when the API does."""

from __future__ import annotations

import json

from memgas.memory import Memory
from memgas.service.app import create_app

__all__ = ["schema_text"]


def schema_text() -> str:
    """The OpenAPI schema of the REST API as JSON text, keys sorted, with a final newline."""
    with Memory(None, method="bm25") as memory:
        app = create_app(memory, mcp=False)
        return json.dumps(app.openapi(), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(schema_text(), end="")
