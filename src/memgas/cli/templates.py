"""``memgas templates list|show|delete|learn|solve|distill``: the Buffer-of-Thoughts buffer of an agent (or user).

Output is JSON. ``list``, ``show``, ``delete``, ``distill`` and ``solve`` (without ``--learn``) refuse a store
file that does not exist; ``learn`` and ``solve --learn`` create it. Without ``--llm``, ``learn`` keeps the
solution pending (``distill`` turns it into a template later, with an LLM); ``solve`` and ``distill`` need one.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable

from memgas.cli.common import print_json, undo_created
from memgas.cli.experience import open_experience, verb_adder
from memgas.core.errors import InvalidInputError

__all__ = ["add_parsers"]


def cmd_list(args: argparse.Namespace) -> int:
    """Print the templates (and pending solutions) as JSON."""
    with open_experience(args) as exp:
        print_json(exp.templates.list(args.kind))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """Print one template or pending solution."""
    with open_experience(args) as exp:
        print_json(exp.templates.get(args.id))
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """Delete templates by id, or all of them with --all."""
    if bool(args.ids) == args.all:
        raise InvalidInputError("name template ids, or pass --all to delete every template (not both)")
    with open_experience(args) as exp:
        print_json({"deleted": exp.templates.delete(None if args.all else args.ids)})
    return 0


def cmd_learn(args: argparse.Namespace) -> int:
    """Distil a template from a solved problem (kept pending when it cannot be written now)."""

    with undo_created(args.db), open_experience(args, create=True) as exp:
        print_json(exp.templates.learn(args.problem, args.solution, answer=args.answer))
    return 0


def cmd_solve(args: argparse.Namespace) -> int:
    """Solve a problem with the best matching template (and learn from it with --learn)."""
    if args.llm is None:
        raise InvalidInputError("solving needs an LLM: pass --llm local or --llm openai:<model>[@<base_url>]")

    with undo_created(args.db), open_experience(args, create=args.learn) as exp:
        print_json(exp.templates.solve(args.problem, learn=args.learn))
    return 0


def cmd_distill(args: argparse.Namespace) -> int:
    """Turn pending solutions into templates."""
    if args.llm is None:
        raise InvalidInputError("distilling needs an LLM: pass --llm local or --llm openai:<model>[@<base_url>]")
    with open_experience(args) as exp:
        print_json(exp.templates.distill_pending())
    return 0


def add_parsers(sub: Any, common: Callable[..., None]) -> None:
    """Add ``memgas templates ...`` to the ``memgas`` subcommands (``common`` adds --db/--method/--llm/--user)."""
    verb = verb_adder(sub, "templates", "Buffer of Thoughts: an agent's thought templates (list, show, delete, "
                      "learn, solve, distill)", common)

    sp = verb("list", cmd_list, "list templates and pending solutions")
    sp.add_argument("--kind", choices=("template", "pending"), help="only this kind")
    sp = verb("show", cmd_show, "print one template or pending solution")
    sp.add_argument("id", type=int, help="the template id (from 'memgas templates list')")
    sp = verb("delete", cmd_delete, "delete templates by id, or --all")
    sp.add_argument("ids", type=int, nargs="*", help="the ids to delete (or --all)")
    sp.add_argument("--all", action="store_true", help="delete every template and pending solution")
    sp = verb("learn", cmd_learn, "distil a template from a solved problem")
    sp.add_argument("problem", help="the problem, as text")
    sp.add_argument("solution", help="how it was solved, as text")
    sp.add_argument("--answer", help="the final answer")
    sp = verb("solve", cmd_solve, "solve a problem with the best matching template (needs --llm)")
    sp.add_argument("problem", help="the problem to solve, as text")
    sp.add_argument("--learn", action="store_true", help="then learn a template from the solution")
    verb("distill", cmd_distill, "turn pending solutions into templates (needs --llm)")
