"""The `barnabas` command: one subcommand per module, known errors turned into one-line exits.

Every error a user can cause is one line on stderr and a non-zero exit: CliError (exit 1 or its
own code), bad arguments (exit 2, without argparse's usage block), an unexpected exception (exit
1, its traceback only with ``BARNABAS_DEBUG=1``), Ctrl-C (130).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from barnabas import __version__

from . import (
    acls,
    bench,
    broker,
    cluster,
    completion,
    consume,
    coordination,
    groups,
    partitions,
    pipeline,
    produce,
    proxy,
    quotas,
    records,
    shutdown,
    topics,
    users,
)
from ._client import add_connection
from .errors import CliError

__all__ = ["main"]

SUBCOMMANDS = (
    broker, proxy, shutdown, cluster, topics, produce, consume, groups, records, partitions, users, acls, quotas,
    coordination, bench, pipeline, completion,
)  # fmt: skip


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the usage is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="barnabas", description="A Kafka-compatible streaming platform with pluggable coordination."
    )
    parser.add_argument("--version", action="version", version=f"barnabas {__version__}")
    add_connection(parser, defaults=True)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in SUBCOMMANDS:
        module.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except CliError as exc:
        print(f"barnabas {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug of ours: still one line, the traceback on request
        if os.environ.get("BARNABAS_DEBUG"):
            traceback.print_exc()
        print(f"barnabas {args.command}: unexpected error ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 1
