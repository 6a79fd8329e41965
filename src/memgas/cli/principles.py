"""``memgas principles list|show|delete|recall|learn|distill``: an agent's (or user's) PRINCIPLES, as JSON.

Read commands (list, show, recall without ``--rewrite``) and delete need an existing store; ``learn``
creates one. Every step that writes or rewrites needs ``--llm``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Callable

from memgas.cli.common import print_json
from memgas.cli.experience import open_experience, verb_adder
from memgas.core.errors import InvalidInputError

__all__ = ["add_parsers"]


def cmd_list(args: argparse.Namespace) -> int:
    """Print every principle of the scope and the number of pending contrasts."""
    with open_experience(args) as exp:
        print_json({"principles": [p.to_dict() for p in exp.principles.list()], "pending": len(exp.principles.pending())})
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """Print one principle."""
    with open_experience(args) as exp:
        print_json(exp.principles.get(args.id).to_dict())
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """Delete principles by id, or all of them (with the pending contrasts) with ``--all``."""
    if bool(args.ids) == args.all:
        raise InvalidInputError("give principle ids or --all (not both)")
    with open_experience(args) as exp:
        print_json({"deleted": exp.principles.delete(None if args.all else args.ids)})
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    """Print the principles nearest a context (by situation), rewritten for it with ``--rewrite``."""
    if args.k < 1:
        raise InvalidInputError("-k must be at least 1")
    with open_experience(args) as exp:
        if args.rewrite:
            print_json([g.to_dict() for g in exp.principles.principles(args.context, args.k)])
        else:
            print_json([{"principle": p.to_dict(), "similarity": round(s, 4)}
                    for p, s in exp.principles.recall(args.context, args.k)])
    return 0


def cmd_learn(args: argparse.Namespace) -> int:
    """Learn from simulated dialogues of shipped scenarios (``--scenario``) or from a judged dialogue file."""
    from memgas.experience.principles import Dialogue, Judgement
    from memgas.experience.scenarios import load_scenarios

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
    with open_experience(args, create=True) as exp:
        if dialogue is not None:
            print_json({"file": args.file, **exp.principles.learn_from_dialogue(*dialogue).to_dict()})
            return 0
        out = []
        for seed in seeds:
            simulated: Dialogue = exp.principles.simulate(seed)
            result = exp.principles.learn_from_dialogue(simulated)
            out.append({"scenario": seed.id, "success": simulated.success, **result.to_dict()})
        print_json(out)
    return 0


def cmd_distill(args: argparse.Namespace) -> int:
    """Retry the extraction of pending contrasts."""
    if args.llm is None:
        raise InvalidInputError("distilling needs --llm (e.g. local)")
    with open_experience(args) as exp:
        print_json(exp.principles.distill_pending().to_dict())
    return 0


def add_parsers(sub: Any, common: Callable[..., None]) -> None:
    """Add ``memgas principles ...`` (``common`` adds --db, --method, --llm and --user)."""
    verb = verb_adder(sub, "principles", "PRINCIPLES: strategy principles learned from judged dialogues", common)

    verb("list", cmd_list, "list the principles")
    sp = verb("show", cmd_show, "print one principle")
    sp.add_argument("id", type=int, help="the principle id (from 'memgas principles list')")
    sp = verb("delete", cmd_delete, "delete principles by id, or --all")
    sp.add_argument("ids", type=int, nargs="*", help="the ids to delete (or --all)")
    sp.add_argument("--all", action="store_true", help="every principle and pending contrast of the scope")
    sp = verb("recall", cmd_recall, "the principles whose situations match a context")
    sp.add_argument("context", help="the situation: the conversation so far, or a summary of it")
    sp.add_argument("-k", type=int, default=3, help="how many principles to recall (default 3)")
    sp.add_argument("--rewrite", action="store_true", help="rewrite each for the context with --llm")
    sp = verb("learn", cmd_learn, "simulate, judge and learn from scenarios, or learn from a judged dialogue file")
    sp.add_argument("--scenario", action="append", default=[], help="a shipped scenario id (repeatable)")
    sp.add_argument("--file", help="JSON with 'messages' and 'judgements' (the shape of Dialogue.to_dict)")
    verb("distill", cmd_distill, "retry the extraction of pending contrasts")
