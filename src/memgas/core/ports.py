"""A free TCP port on loopback, for the servers memgas starts as children (``memgas serve`` for the HTTP
benchmark and the tests, a throwaway PostgreSQL cluster)."""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the server that is handed it binds it a moment later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
