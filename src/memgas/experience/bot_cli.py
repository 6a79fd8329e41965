"""Placeholder: the bot commands are being written."""

from __future__ import annotations

from typing import Any, Callable


def add_parsers(sub: Any, common: Callable[..., None]) -> None:
    """Add nothing yet."""
