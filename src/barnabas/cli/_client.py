"""Shared helpers for subcommands that talk to a cluster through librdkafka."""

from __future__ import annotations

import argparse
from typing import Any

from .errors import CliError

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def add_bootstrap(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap", "-b", default=DEFAULT_BOOTSTRAP, help=f"host:port (default {DEFAULT_BOOTSTRAP})")


def kafka_error(exc: Any) -> CliError:
    """A one-line CliError from a confluent_kafka KafkaException or KafkaError."""
    error = exc.args[0] if getattr(exc, "args", None) else exc
    text = error.str() if hasattr(error, "str") else str(error)
    return CliError(text)
