"""Every command's and action's --help prints (argparse %-formats help strings: a stray % breaks it)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from barnabas.cli import build_parser


def every_parser(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):  # aliases share a parser
                yield from every_parser(child)


PARSERS = {parser.prog: parser for parser in every_parser(build_parser())}


@pytest.mark.parametrize("prog", sorted(PARSERS))
def test_help_prints(prog: str) -> None:
    text = PARSERS[prog].format_help()
    assert text.startswith(f"usage: {prog}")


def test_every_subcommand_is_walked() -> None:
    assert {"barnabas consume", "barnabas produce", "barnabas partitions reassign", "barnabas cluster log-dirs",
            "barnabas groups delete-offsets"} <= set(PARSERS)  # fmt: skip
