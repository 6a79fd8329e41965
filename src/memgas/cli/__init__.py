"""The ``memgas`` command line: every argparse parser of memgas lives in this package, and nothing else
imports it.

:mod:`~memgas.cli.commands` holds the memory commands and :func:`main`; :mod:`~memgas.cli.common` what every
command shares; :mod:`~memgas.cli.service` (``serve``, ``keys``, ``mcp``), :mod:`~memgas.cli.templates` and
:mod:`~memgas.cli.principles` (experience memory) and :mod:`~memgas.cli.bench` add their subcommands.
"""

from memgas.cli.commands import build_parser, main

__all__ = ["main", "build_parser"]
