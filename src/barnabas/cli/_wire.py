"""One request over barnabas's own Kafka client, for the admin APIs librdkafka has no call for.

``barnabas users`` (AlterUserScramCredentials, DescribeUserScramCredentials) and ``barnabas quotas``
(DescribeClientQuotas, AlterClientQuotas) send their request to the first bootstrap server, with
the connection settings librdkafka would take from ``--command-config`` and ``-X``:
``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), ``sasl.mechanism``,
``sasl.username``, ``sasl.password`` and ``ssl.ca.location``. A broker that cannot be reached or
authenticated with is one line (CliError); the answer's error codes are the caller's to read.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from ._client import client_config
from .errors import CliError

__all__ = ["ask"]


def ask(args: argparse.Namespace, api_key: int, body: Any, api_version: int = 0) -> Any:
    """Send one request to the first bootstrap server, authenticated as the client settings say.

    Returns:
        The decoded response body.

    Raises:
        CliError: the broker could not be reached, authenticated with, or did not answer in ``--timeout``.
    """
    settings = client_config(args)
    return asyncio.run(_request(settings, api_key, api_version, body, float(args.timeout)))


async def _request(settings: dict[str, Any], api_key: int, api_version: int, body: Any, timeout_s: float) -> Any:
    from barnabas.client import BrokerConnectionError, KafkaClient

    first = str(settings["bootstrap.servers"]).split(",")[0].strip()
    host, _, port = first.rpartition(":")
    if not host or not port.isdigit():
        raise CliError(f"bootstrap server {first!r}: expected HOST:PORT")
    tls, sasl = _security(settings)
    try:
        async with await KafkaClient.connect(
            host, int(port), client_id="barnabas-cli", timeout_s=timeout_s, tls=tls, sasl=sasl
        ) as client:
            return await client.request(api_key, api_version, body, timeout_s=timeout_s)
    except (BrokerConnectionError, TimeoutError, OSError) as exc:
        raise CliError(str(exc) or type(exc).__name__) from None


def _security(settings: dict[str, Any]) -> tuple[Any, Any]:
    """The TLS context and SASL client side that librdkafka's settings ask for."""
    import ssl

    protocol = str(settings.get("security.protocol", "PLAINTEXT")).upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise CliError(f"security.protocol={protocol} is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL")
    tls = None
    if protocol.endswith("SSL"):
        tls = ssl.create_default_context(cafile=settings.get("ssl.ca.location"))
    if not protocol.startswith("SASL"):
        return tls, None
    from barnabas.security.sasl import sasl_client_factory  # its package loads the broker's config: only for SASL

    mechanism = str(settings.get("sasl.mechanism", settings.get("sasl.mechanisms", "GSSAPI"))).upper()
    username, password = settings.get("sasl.username"), settings.get("sasl.password")
    if username is None or password is None:
        raise CliError("SASL needs sasl.username and sasl.password (-X or --command-config)")
    try:
        return tls, sasl_client_factory(mechanism, str(username), str(password))()
    except ValueError as exc:
        raise CliError(str(exc)) from None
