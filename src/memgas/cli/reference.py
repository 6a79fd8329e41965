"""The command line's reference, generated from its parsers: the docs' CLI page is this module's :func:`markdown`.

Nothing is written by hand, so a command or a flag cannot be left out of the reference; ``tests/system/test_docs.py``
checks the built page against :func:`commands` and that every command and argument has a help text.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from memgas.cli.commands import build_parser

__all__ = ["commands", "markdown"]

#: The width usage lines are wrapped at, whatever the terminal that builds the docs.
_WIDTH = 100


def commands(parser: argparse.ArgumentParser | None = None) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """Every command that runs something, as ``(name, help, parser)``: ``"memgas add"``, ``"memgas keys create"``...

    A command whose only job is to choose a subcommand (``memgas keys``) is not listed itself; its subcommands are.
    """
    parser = parser or build_parser()
    yield from _walk(parser, parser.prog, parser.description or "")


def _walk(parser: argparse.ArgumentParser, name: str, help_text: str) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not groups:
        yield name, help_text, parser
        return
    for group in groups:
        helps = {choice.dest: choice.help or "" for choice in group._choices_actions}
        for sub_name, sub in group.choices.items():
            yield from _walk(sub, f"{name} {sub_name}", helps.get(sub_name, ""))


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(prog=parser.prog, width=_WIDTH)  # every parser here uses the default
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")


def _row(action: argparse.Action) -> str:
    name = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.dest}`"
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        name += " (" + " \\| ".join(f"`{c}`" for c in action.choices) + ")"
    helped = action.help or ""
    if action.required and action.option_strings:
        helped += " (required)"
    return f"| {name} | {_cell(helped)} |"


def markdown(parser: argparse.ArgumentParser | None = None) -> str:
    """The reference as Markdown: one section per command, its usage and a table of its arguments."""
    parts = []
    for name, help_text, sub in commands(parser):
        rows = [_row(a) for a in sub._actions if a.help is not argparse.SUPPRESS and "-h" not in a.option_strings]
        parts.append(f"## {name}\n\n{_cell(help_text)}\n\n```text\n{_usage(sub)}\n```\n")
        if rows:
            parts.append("| argument | what it does |\n|---|---|\n" + "\n".join(rows) + "\n")
    return "\n".join(parts)
