"""The admin requests librdkafka has no API for, sent through kafka-python's admin client.

OffsetDelete (to the group's coordinator) and the partition
reassignment requests (to the controller) are routed and retried by kafka-python as Kafka's own
Admin client routes them. Commands connect with ``connect_admin`` first, so an unreachable cluster
is already one line by the time this client is made; its own log lines are silenced unless
``--verbose``, like librdkafka's.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from .errors import CliError

__all__ = ["error_name", "python_admin"]


def python_admin(args: argparse.Namespace, bootstrap: str | None = None) -> Any:
    """A kafka-python KafkaAdminClient for ``bootstrap`` (default ``--bootstrap``), bounded by ``--timeout``.

    Raises:
        CliError: no broker answered.
    """
    bootstrap = bootstrap or args.bootstrap
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError

    if not args.verbose:
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
    timeout_ms = int(args.timeout * 1000)
    try:
        return KafkaAdminClient(
            bootstrap_servers=bootstrap.split(","),
            client_id="barnabas-cli",
            request_timeout_ms=timeout_ms,
            bootstrap_timeout_ms=timeout_ms,
        )
    except KafkaError as exc:
        raise CliError(f"cannot reach the cluster at {bootstrap} within {args.timeout:g} s: {exc}") from None


def error_name(error: Any) -> str:
    """Kafka's name for a kafka-python error class or instance (UNKNOWN_TOPIC_OR_PARTITION, ...)."""
    kind = error if isinstance(error, type) else type(error)
    return str(getattr(kind, "message", kind.__name__))
