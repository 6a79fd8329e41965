"""The experience commands: ``memgas templates ...`` (Buffer of Thoughts) and ``memgas principles ...``."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from .facade import Experience

__all__ = ["add_experience_parsers", "open_experience", "print_json", "verb_adder"]

Verb = Callable[[str, Callable[[argparse.Namespace], int], str], argparse.ArgumentParser]


def open_experience(args: argparse.Namespace, *, create: bool = False) -> "Experience":
    """The :class:`~memgas.experience.facade.Experience` of ``--db`` for ``--agent`` or ``--user``; the store
    must exist unless ``create`` (read commands never create one)."""
    from ..cli import _require_store
    from .facade import Experience

    if not create:
        _require_store(args.db)
    return Experience(args.db, agent_id=args.agent, user_id=args.user, llm=args.llm)


def print_json(value: Any) -> None:
    """Print ``value`` as indented UTF-8 JSON."""
    print(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def verb_adder(sub: Any, name: str, help_text: str, common: Callable[..., None]) -> Verb:
    """Add the command ``name`` and return ``verb(name, func, help)``, which adds one of its verbs with the
    options every experience verb takes (``--db``, ``--llm``, ``--agent`` or ``--user``)."""
    verbs = sub.add_parser(name, help=help_text).add_subparsers(dest=f"{name}_verb", required=True)

    def verb(verb_name: str, func: Callable[[argparse.Namespace], int], verb_help: str) -> argparse.ArgumentParser:
        sp = verbs.add_parser(verb_name, help=verb_help)
        common(sp)  # --user: one user's own experience instead of an agent's
        sp.add_argument("--agent", help="the agent whose experience it is (shared by its users); or --user")
        sp.set_defaults(func=func)
        return sp

    return verb


def add_experience_parsers(sub: Any, common: Callable[..., None]) -> None:
    """Add each design's commands to the ``memgas`` subcommands (``common`` adds --db/--method/--llm)."""
    from .bot_cli import add_parsers as add_bot_parsers
    from .principles_cli import add_parsers as add_principles_parsers

    add_bot_parsers(sub, common)
    add_principles_parsers(sub, common)
