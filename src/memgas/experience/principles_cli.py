"""``memgas principles list|show|delete|recall|learn|distill``: an agent's (or user's) PRINCIPLES, as JSON.

Read commands (list, show, recall without ``--rewrite``) and delete need an existing store; ``learn``
creates one. Every step that writes or rewrites needs ``--llm``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Callable

from ..model import InvalidInputError

__all__ = ["add_parsers"]


def _experience(args: argparse.Namespace, *, create: bool = False) -> Any:
    """The :class:`Experience` of ``--db`` for ``--agent`` or ``--user`` (the store must exist unless ``create``)."""
    from ..cli import _require_store
    from .facade import Experience

    if not create:
        _require_store(args.db)
    return Experience(args.db, agent_id=args.agent, user_id=args.user, llm=args.llm)


def _print(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def cmd_list(args: argparse.Namespace) -> int:
    """Print every principle of the scope and the number of pending contrasts."""
    with _experience(args) as exp:
        _print({"principles": [p.to_dict() for p in exp.principles.list()], "pending": len(exp.principles.pending())})
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """Print one principle."""
    with _experience(args) as exp:
        _print(exp.principles.get(args.id).to_dict())
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """Delete principles by id, or all of them (with the pending contrasts) with ``--all``."""
    if bool(args.ids) == args.all:
        raise InvalidInputError("give principle ids or --all (not both)")
    with _experience(args) as exp:
        _print({"deleted": exp.principles.delete(None if args.all else args.ids)})
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    """Print the principles nearest a context (by situation), rewritten for it with ``--rewrite``."""
    if args.k < 1:
        raise InvalidInputError("-k must be at least 1")
    with _experience(args) as exp:
        if args.rewrite:
            _print([g.to_dict() for g in exp.principles.principles(args.context, args.k)])
        else:
            _print([{"principle": p.to_dict(), "similarity": round(s, 4)}
                    for p, s in exp.principles.recall(args.context, args.k)])
    return 0


def cmd_learn(args: argparse.Namespace) -> int:
    """Learn from simulated dialogues of shipped scenarios (``--scenario``) or from a judged dialogue file."""
    from .principles import Dialogue, Judgement
    from .scenarios import load_scenarios

    if bool(args.scenario) == bool(args.file):
        raise InvalidInputError("give --scenario ID (repeatable) or --file DIALOGUE.json")
    if args.llm is None:
        raise InvalidInputError("learning needs --llm (e.g. local)")
    dialogue: Any = None
    if args.file:
        try:
            data = json.loads(Path(args.file).read_text("utf-8"))
            messages, judgements = data["messages"], [Judgement.from_dict(j) for j in data["judgements"]]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise InvalidInputError(f"{args.file}: expected JSON with 'messages' and 'judgements' ({e})") from None
        dialogue = (messages, judgements)
    seeds = [load_scenarios().get(s) for s in args.scenario or ()]
    with _experience(args, create=True) as exp:
        if dialogue is not None:
            _print({"file": args.file, **exp.principles.learn_from_dialogue(*dialogue).to_dict()})
            return 0
        out = []
        for seed in seeds:
            simulated: Dialogue = exp.principles.simulate(seed)
            result = exp.principles.learn_from_dialogue(simulated)
            out.append({"scenario": seed.id, "success": simulated.success, **result.to_dict()})
        _print(out)
    return 0


def cmd_distill(args: argparse.Namespace) -> int:
    """Retry the extraction of pending contrasts."""
    if args.llm is None:
        raise InvalidInputError("distilling needs --llm (e.g. local)")
    with _experience(args) as exp:
        _print(exp.principles.distill_pending().to_dict())
    return 0


def add_parsers(sub: Any, common: Callable[..., None]) -> None:
    """Add ``memgas principles ...`` (``common`` adds --db, --method, --llm and --user)."""
    p = sub.add_parser("principles", help="PRINCIPLES: strategy principles learned from judged dialogues")
    commands = p.add_subparsers(dest="principles_command", required=True)

    def scoped(name: str, help: str, func: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
        sp = commands.add_parser(name, help=help)
        common(sp)
        sp.add_argument("--agent", help="the agent whose experience it is (or --user for one user's)")
        sp.set_defaults(func=func, agent=None)
        return sp

    scoped("list", "list the principles", cmd_list)
    sp = scoped("show", "print one principle", cmd_show)
    sp.add_argument("id", type=int)
    sp = scoped("delete", "delete principles by id, or --all", cmd_delete)
    sp.add_argument("ids", type=int, nargs="*")
    sp.add_argument("--all", action="store_true", help="every principle and pending contrast of the scope")
    sp = scoped("recall", "the principles whose situations match a context", cmd_recall)
    sp.add_argument("context")
    sp.add_argument("-k", type=int, default=3)
    sp.add_argument("--rewrite", action="store_true", help="rewrite each for the context with --llm")
    sp = scoped("learn", "simulate, judge and learn from scenarios, or learn from a judged dialogue file", cmd_learn)
    sp.add_argument("--scenario", action="append", default=[], help="a shipped scenario id (repeatable)")
    sp.add_argument("--file", help="JSON with 'messages' and 'judgements' (the shape of Dialogue.to_dict)")
    scoped("distill", "retry the extraction of pending contrasts", cmd_distill)
