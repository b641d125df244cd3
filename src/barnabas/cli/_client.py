"""The connection options every client subcommand takes, and the librdkafka settings they make.

Rules this module keeps:

- The options are accepted anywhere on the line (``barnabas -b X topics list``, ``topics -b X
  list``, ``topics list -b X``): the top-level parser sets the defaults, every command's and
  action's parser takes the same options without defaults (``argparse.SUPPRESS``, so a
  subparser never overwrites what was given before it), and what is given last wins.
- The bootstrap servers come from ``-b``/``--bootstrap-server``/``--bootstrap``, else
  ``BARNABAS_BOOTSTRAP``, else 127.0.0.1:9092. Client settings come, lowest first, from the
  command's own defaults, ``--command-config FILE`` (a Kafka client properties file, as Kafka's
  tools take) and ``-X KEY=VALUE``.
- librdkafka logs nothing unless ``--verbose``: an unreachable broker is one line of ours, not
  hundreds of its. Every command first checks, within ``--timeout``, that the cluster answers.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import CliError

__all__ = [
    "DEFAULT_BOOTSTRAP",
    "action_parser",
    "add_connection",
    "client_config",
    "connect_admin",
    "kafka_error",
    "make_client",
    "non_negative_int",
    "positive_float",
    "positive_int",
]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_TIMEOUT_S = 10.0
#: librdkafka's syslog levels: 0 keeps it quiet; 6 (info) is its own default.
QUIET, VERBOSE = 0, 6


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def non_negative_int(text: str) -> int:
    """An argparse type: an integer of at least 0."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, not {value}")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def add_connection(parser: argparse.ArgumentParser, *, defaults: bool = False) -> None:
    """Add the connection options; with their defaults only on the top-level parser (module rules)."""

    def default(value: Any) -> Any:
        return value if defaults else argparse.SUPPRESS

    bootstrap = os.environ.get("BARNABAS_BOOTSTRAP") or DEFAULT_BOOTSTRAP
    parser.add_argument(
        "-b", "--bootstrap-server", "--bootstrap", dest="bootstrap", default=default(bootstrap), metavar="HOST:PORT",
        help=f"brokers to connect to (default $BARNABAS_BOOTSTRAP or {DEFAULT_BOOTSTRAP})",
    )  # fmt: skip
    parser.add_argument(
        "--command-config", type=Path, default=default(None), metavar="FILE",
        help="client settings from a Kafka properties file (security, timeouts, ...)",
    )  # fmt: skip
    parser.add_argument(
        "-X", dest="client_settings", action="append", default=default([]), metavar="KEY=VALUE",
        help="a librdkafka client setting (repeatable; wins over --command-config)",
    )  # fmt: skip
    parser.add_argument(
        "--timeout", type=positive_float, default=default(DEFAULT_TIMEOUT_S), metavar="SECONDS",
        help=f"give up on an unreachable cluster after this (default {DEFAULT_TIMEOUT_S:g})",
    )  # fmt: skip
    parser.add_argument(
        "--verbose", action="store_true", default=default(False), help="show the Kafka client's own log lines"
    )


def action_parser(actions: Any, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    """An action's parser that also takes the connection options (given after the action)."""
    parser: argparse.ArgumentParser = actions.add_parser(name, **kwargs)
    add_connection(parser, defaults=False)
    return parser


def client_config(args: argparse.Namespace, **defaults: Any) -> dict[str, Any]:
    """librdkafka settings: the command's ``defaults``, then --command-config, then -X, then quiet logs.

    Raises:
        CliError: the properties file cannot be read, or a setting is not KEY=VALUE.
    """
    config: dict[str, Any] = {"bootstrap.servers": args.bootstrap, **defaults}
    if args.command_config is not None:
        config.update(_properties(args.command_config))
    for item in args.client_settings:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"-X {item!r}: expected KEY=VALUE")
        config[key.strip()] = value.strip()
    config.setdefault("log_level", VERBOSE if args.verbose else QUIET)
    return config


def _properties(path: Path) -> dict[str, str]:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"--command-config {path}: {exc}") from None
    settings = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        at = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)  # Java's separators
        if at <= 0:
            raise CliError(f"--command-config {path}, line {number}: expected KEY=VALUE")
        settings[line[:at].strip()] = line[at + 1 :].strip()
    return settings


def connect_admin(args: argparse.Namespace, **defaults: Any) -> Any:
    """An AdminClient for the cluster, once it has answered a Metadata request within ``--timeout``.

    Raises:
        CliError: the cluster did not answer in time, or a client setting is invalid.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = make_client(AdminClient, client_config(args, **defaults))
    try:
        admin.list_topics(timeout=args.timeout)
    except KafkaException as exc:
        raise CliError(
            f"cannot reach the cluster at {args.bootstrap} within {args.timeout:g} s: {kafka_error(exc)}"
        ) from None
    return admin


def make_client(kind: Callable[[dict[str, Any]], Any], config: dict[str, Any]) -> Any:
    """A confluent-kafka client of ``kind``; a setting it refuses is one line, not a traceback."""
    from confluent_kafka import KafkaException

    try:
        return kind(config)
    except (KafkaException, ValueError, TypeError) as exc:
        raise CliError(f"invalid client settings: {kafka_error(exc)}") from None


def kafka_error(exc: Any) -> CliError:
    """A one-line CliError from a confluent_kafka KafkaException or KafkaError."""
    error = exc.args[0] if getattr(exc, "args", None) else exc
    text = error.str() if hasattr(error, "str") else str(error)
    return CliError(text)
