"""One request to whichever bootstrap broker answers, over barnabas's own Kafka client.

For the requests any broker answers for the whole cluster and no client library sends the way
they are needed: a broker's cordon (IncrementalAlterConfigs on a broker resource, which
librdkafka would send to that broker only, and a broker being removed may be down) and
UnregisterBroker (no client library has it). The ``--bootstrap`` addresses are tried in turn, each
within ``--timeout``; like ``cluster log-dirs``, it speaks PLAINTEXT only.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from .errors import CliError

__all__ = ["request_any_broker"]


def request_any_broker(args: argparse.Namespace, api_key: int, version: int, body: Any) -> Any:
    """The answer of the first bootstrap broker that answers ``body``.

    Raises:
        CliError: no bootstrap broker answered.
    """
    addresses = [address.strip() for address in str(args.bootstrap).split(",") if address.strip()]
    answer, failures = asyncio.run(_first_answer(addresses, api_key, version, body, float(args.timeout)))
    if answer is None:
        reasons = "; ".join(failures) or "no bootstrap address"
        raise CliError(f"cannot reach the cluster at {args.bootstrap} within {args.timeout:g} s: {reasons}")
    return answer


async def _first_answer(
    addresses: list[str], api_key: int, version: int, body: Any, timeout_s: float
) -> tuple[Any, list[str]]:
    """The first answer (None if none came), and why each address tried before it gave none."""
    from barnabas.client import BrokerConnectionError, KafkaClient

    failures: list[str] = []
    for address in addresses:
        host, _, port = address.rpartition(":")
        try:
            async with await KafkaClient.connect(
                host.strip("[]"), int(port), client_id="barnabas-cli", timeout_s=timeout_s, request_timeout_s=timeout_s
            ) as client:
                return await client.request(api_key, version, body), failures
        except (BrokerConnectionError, TimeoutError, OSError, ValueError) as exc:
            failures.append(f"{address}: {exc or type(exc).__name__}")
    return None, failures
