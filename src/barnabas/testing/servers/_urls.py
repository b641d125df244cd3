"""The coordination URLs a server (or a quorum of them) hands to brokers and tests."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import ClassVar

__all__ = ["CoordinationUrls", "QuorumUrls", "ServerUrls"]


class CoordinationUrls:
    """``url`` (the default path) and ``url_for`` (a fresh path, so tests sharing a server never collide)
    for ``SCHEME://HOSTS/PATH``; subclasses say the scheme and which hosts."""

    scheme: ClassVar[str]

    @property
    def hosts(self) -> str:
        raise NotImplementedError

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.hosts}/barnabas"

    def url_for(self, path: str | None = None) -> str:
        return f"{self.scheme}://{self.hosts}/{path or 't-' + uuid.uuid4().hex[:12]}"


class ServerUrls(CoordinationUrls):
    """One server's URLs: its client port on 127.0.0.1 (or the address it was given on a private network)."""

    client_port: int
    host: str = "127.0.0.1"

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def hosts(self) -> str:
        return self.endpoint


class QuorumUrls(CoordinationUrls):
    """A quorum's URLs: every member's endpoint."""

    def member_urls(self) -> Sequence[ServerUrls]:
        raise NotImplementedError

    @property
    def endpoints(self) -> str:
        return ",".join(member.endpoint for member in self.member_urls())

    @property
    def hosts(self) -> str:
        return self.endpoints
