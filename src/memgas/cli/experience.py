"""What the experience commands (``memgas templates ...``, :mod:`memgas.cli.templates`; ``memgas principles ...``,
:mod:`memgas.cli.principles`) share: opening the experience of ``--agent`` or ``--user`` and adding a verb."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Callable

from memgas.cli.common import require_store
from memgas.core.errors import InvalidInputError

if TYPE_CHECKING:
    from memgas.experience.facade import Experience

__all__ = ["open_experience", "verb_adder"]

Verb = Callable[[str, Callable[[argparse.Namespace], int], str], argparse.ArgumentParser]


def open_experience(args: argparse.Namespace, *, create: bool = False) -> "Experience":
    """The :class:`~memgas.experience.facade.Experience` of ``--db`` for ``--agent`` or ``--user``; the store
    must exist unless ``create`` (read commands never create one)."""
    from memgas.experience.facade import Experience

    if (args.agent is None) == (args.user is None):  # said in the flags' words, before the library's field names
        raise InvalidInputError("experience belongs to an agent or to a user: give exactly one of --agent, --user")
    if not create:
        require_store(args.db)
    return Experience(args.db, agent_id=args.agent, user_id=args.user, llm=args.llm)


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
