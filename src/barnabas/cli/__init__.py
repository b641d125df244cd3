"""The `barnabas` command: one subcommand per module, known errors turned into one-line exits."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from barnabas import __version__

from . import bench, broker, cluster, consume, coordination, groups, pipeline, produce, topics
from .errors import CliError

__all__ = ["main"]

SUBCOMMANDS = (broker, cluster, topics, produce, consume, groups, coordination, bench, pipeline)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="barnabas", description="A Kafka-compatible streaming platform with pluggable coordination."
    )
    parser.add_argument("--version", action="version", version=f"barnabas {__version__}")
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
