"""`barnabas completion SHELL`: a tab-completion script for bash, zsh or tcsh, from the command's own parser.

Install with ``eval "$(barnabas completion bash)"`` in ``~/.bashrc`` (or the zsh equivalent).
"""

from __future__ import annotations

import argparse
from typing import Any

SHELLS = ("bash", "zsh", "tcsh")


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "completion",
        help="print a shell completion script",
        description='Print a completion script: eval "$(barnabas completion bash)"',
    )
    parser.add_argument("shell", choices=SHELLS)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import shtab

    from . import build_parser

    print(shtab.complete(build_parser(), shell=args.shell))
    return 0
