"""The experience commands: ``memgas templates ...`` (Buffer of Thoughts) and ``memgas principles ...``."""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["add_experience_parsers"]


def add_experience_parsers(sub: Any, common: Callable[..., None]) -> None:
    """Add each design's commands to the ``memgas`` subcommands (``common`` adds --db/--method/--llm)."""
    from .bot_cli import add_parsers as add_bot_parsers
    from .principles_cli import add_parsers as add_principles_parsers

    add_bot_parsers(sub, common)
    add_principles_parsers(sub, common)
