"""Where a listener's JWKS comes from: a file reread when it changes, or an HTTP(S) URL fetched off the event loop.

Rules this module keeps (Kafka's JwksFileVerificationKeyResolver and RefreshingHttpsJwks):

- Both read their JWKS when built, so a broker whose key set cannot be had stops before it serves.
- A file is checked (one ``stat``) each time a token is validated and reread when its size or
  modification time changed; Kafka reads it once, but a rotated key should not need a restart.
- A URL is fetched again every ``sasl.oauthbearer.jwks.endpoint.refresh.ms`` on a thread of its own,
  so no fetch ever blocks the event loop. A fetch that fails is retried with waits from
  ``...retry.backoff.ms`` doubling, for at most ``...retry.backoff.max.ms`` in all (Kafka's Retry);
  after that the keys held are kept and the failure is logged.
- A token naming a kid the set lacks wakes the refresh thread at once, at most once a minute per
  kid (MISSING_KEY_ID_CACHE_IN_FLIGHT_MS), for at most 16 kids remembered, and never for a kid
  over 1000 characters. The token itself is refused: the next one may find the new key.
- Keys are swapped whole (one reference), so the event loop never sees a half-updated set.
- HTTPS verifies the server against the context given (the JAAS entry's ``ssl.truststore.*``, else
  the system's CAs). Proxies from the environment are not used, as the JVM does not use them. A
  response over 1 MiB is refused.
"""

from __future__ import annotations

import collections
import logging
import os
import ssl
import threading
import time
import urllib.request
from pathlib import Path
from typing import Protocol

from .jwks import KeySet, parse_jwks

__all__ = ["HttpsJwks", "JwksFile", "KeySource"]

log = logging.getLogger(__name__)

MISSING_KID_INTERVAL_S = 60.0
MISSING_KIDS_REMEMBERED = 16
MISSING_KID_MAX_LENGTH = 1000
MAX_JWKS_BYTES = 1 << 20
FETCH_TIMEOUT_S = 10.0


class KeySource(Protocol):
    """The current key set of a JWKS, and a way to say a token named a key it lacks."""

    @property
    def location(self) -> str: ...

    def key_set(self) -> KeySet: ...

    def missing(self, kid: str) -> None:
        """A token named ``kid``, which the set lacks: look again soon (rate-limited)."""
        ...

    def close(self) -> None: ...


class JwksFile:
    """A JWKS file (``file://`` URL), reread when it changes."""

    def __init__(self, path: Path) -> None:
        """Read the file now.

        Raises:
            OSError: it cannot be read.
            ValueError: it is no JWKS with a usable key.
        """
        self._path = path
        self._stamp = self._stat()
        self._keys = parse_jwks(path.read_bytes(), str(path))

    @property
    def location(self) -> str:
        return str(self._path)

    def _stat(self) -> tuple[int, int, int]:
        stat = os.stat(self._path)
        return stat.st_ino, stat.st_size, stat.st_mtime_ns

    def key_set(self) -> KeySet:
        try:
            stamp = self._stat()
            if stamp != self._stamp:
                self._stamp = stamp
                self._keys = parse_jwks(self._path.read_bytes(), str(self._path))
                log.info("JWKS %s reread: %d keys", self._path, len(self._keys.keys))
        except (OSError, ValueError) as exc:
            log.warning("JWKS %s: cannot reread it, keeping the %d keys held: %s", self._path, len(self._keys.keys),
                        exc)  # fmt: skip
        return self._keys

    def missing(self, kid: str) -> None:
        """Nothing to do: the file is reread whenever it changes."""

    def close(self) -> None:
        """Nothing to release."""


class HttpsJwks:
    """A JWKS URL (``https://`` or ``http://``), fetched now and refreshed on a daemon thread."""

    def __init__(
        self, url: str, context: ssl.SSLContext | None, *, refresh_ms: int, backoff_ms: int, backoff_max_ms: int
    ) -> None:
        """Fetch the key set now (retrying as configured) and start refreshing it.

        Raises:
            OSError: every fetch failed.
            ValueError: the answer is no JWKS with a usable key.
        """
        self._url = url
        handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
        if context is not None:
            handlers.append(urllib.request.HTTPSHandler(context=context))
        self._opener = urllib.request.build_opener(*handlers)
        self._refresh_s = refresh_ms / 1000
        self._backoff_s = backoff_ms / 1000
        self._backoff_max_s = max(backoff_max_ms, backoff_ms) / 1000
        self._stopped = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._missing: collections.OrderedDict[str, float] = collections.OrderedDict()
        self._keys = self._fetch_with_retry()
        self._thread = threading.Thread(target=self._run, name=f"jwks-refresh {url}", daemon=True)
        self._thread.start()
        log.info("JWKS %s: %d keys; refreshed every %d ms", url, len(self._keys.keys), refresh_ms)

    @property
    def location(self) -> str:
        return self._url

    def key_set(self) -> KeySet:
        return self._keys

    def missing(self, kid: str) -> None:
        if len(kid) > MISSING_KID_MAX_LENGTH:
            log.warning("JWKS %s: a token's kid is %d characters long; not looked up", self._url, len(kid))
            return
        now = time.monotonic()
        with self._lock:
            due = self._missing.get(kid)
            if due is not None and due > now:
                return
            self._missing[kid] = now + MISSING_KID_INTERVAL_S
            self._missing.move_to_end(kid)
            while len(self._missing) > MISSING_KIDS_REMEMBERED:
                self._missing.popitem(last=False)
        log.info("JWKS %s: no key with kid %r; fetching it again now", self._url, kid[:100])
        self._wake.set()

    def close(self) -> None:
        """Stop the refresh thread (it is a daemon: a process that exits without this loses nothing)."""
        self._stopped.set()
        self._wake.set()
        self._thread.join(timeout=FETCH_TIMEOUT_S)

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(self._refresh_s)
            self._wake.clear()
            if self._stopped.is_set():
                return
            try:
                keys = self._fetch_with_retry()
            except (OSError, ValueError) as exc:
                log.warning("JWKS %s: refresh failed, keeping the %d keys held: %s", self._url,
                            len(self._keys.keys), exc)  # fmt: skip
                continue
            with self._lock:
                for key in keys.keys:
                    if key.kid is not None:
                        self._missing.pop(key.kid, None)
            self._keys = keys
            log.info("JWKS %s refreshed: %d keys", self._url, len(keys.keys))

    def _fetch_with_retry(self) -> KeySet:
        """Fetch until one attempt works or ``retry.backoff.max.ms`` has passed (Kafka's Retry)."""
        deadline = time.monotonic() + self._backoff_max_s
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._fetch()
            except (OSError, ValueError) as exc:
                wait = min(self._backoff_s * 2 ** (attempt - 1), deadline - time.monotonic())
                if wait <= 0 or self._stopped.is_set():
                    raise
                log.warning("JWKS %s: fetch %d failed (%s); retrying in %.0f ms", self._url, attempt, exc,
                            wait * 1000)  # fmt: skip
                if self._stopped.wait(wait):
                    raise

    def _fetch(self) -> KeySet:
        request = urllib.request.Request(self._url, headers={"Accept": "application/json"})
        with self._opener.open(request, timeout=FETCH_TIMEOUT_S) as response:
            body: bytes = response.read(MAX_JWKS_BYTES + 1)
        if len(body) > MAX_JWKS_BYTES:
            raise ValueError(f"the JWKS from {self._url} is over {MAX_JWKS_BYTES} bytes")
        return parse_jwks(body, self._url)
