"""The table of APIs this broker serves: key, advertised versions, accepted versions, handler.

ApiVersions advertises exactly this table, so a handler and its version range live together.
Produce is advertised from v0 but served from v3: librdkafka < 2.11.1 turns compression off
when Produce's advertised minimum is above 0 (KAFKA-18659), and Kafka 4 does the same.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Iterator, Sequence, Sized
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from barnabas.protocol import Request

if TYPE_CHECKING:
    from .state import BrokerState

__all__ = ["API_VERSIONS_KEY", "CLOSE_CONNECTION", "ApiRegistry", "ApiSpec", "Handler", "Response"]

API_VERSIONS_KEY = 18


class _Close(enum.Enum):
    CLOSE_CONNECTION = enum.auto()


#: A handler returns this to have the connection closed instead of answered (acks=0 errors).
CLOSE_CONNECTION = _Close.CLOSE_CONNECTION

#: A frame, or its chunks (byte buffers and, for Fetch, segment file ranges) in order.
Response: TypeAlias = bytes | Sequence[Sized] | _Close | None
Handler: TypeAlias = Callable[["BrokerState", Request], Response | Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler
    #: Lowest version actually served, when lower ones are advertised but refused.
    accept_min: int | None = None
    #: The connection may read and start the next request while this one's awaitable runs
    #: (answers still go out in order); any other request waits for those to finish first.
    pipelined: bool = False

    def accepts(self, version: int) -> bool:
        low = self.min_version if self.accept_min is None else self.accept_min
        return low <= version <= self.max_version


class ApiRegistry:
    def __init__(self, specs: list[ApiSpec]) -> None:
        self._specs = {spec.key: spec for spec in specs}

    def get(self, api_key: int) -> ApiSpec | None:
        return self._specs.get(api_key)

    def __iter__(self) -> Iterator[ApiSpec]:
        return iter(sorted(self._specs.values(), key=lambda spec: spec.key))

    def versions(self) -> list[tuple[int, int, int]]:
        """(api_key, min, max) for ApiVersions, in key order."""
        return [(spec.key, spec.min_version, spec.max_version) for spec in self]
