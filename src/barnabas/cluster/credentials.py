"""SCRAM credentials in coordination, and every broker's cache of them (Kafka's /config/users and CredentialCache).

Rules this module keeps:

- One key per user and mechanism, ``credentials/scram/<MECHANISM>/<user>`` (the user percent-encoded,
  so any name is one key), holding JSON ``{salt, stored_key, server_key, iterations}`` with the
  bytes in base64: what RFC 5802's server keeps, never the password or the salted password.
- Every change of a user's credentials is one commit (compare-and-set on each key), so a user's
  alterations in one AlterUserScramCredentials request all land or none does.
- The cache is read whole at start and kept current by the metadata watcher's watch on the prefix
  (re-reading the keys a change names); a broker that wrote a change re-reads it at once. A new
  user therefore authenticates on every broker without a restart, as soon as its watch reports.
- ``credentials_secret`` holds the cluster's random secret for unknown users' made-up credentials
  (``barnabas.security.scram.mock_credential``), written once by the first broker to need it, so
  every broker makes up the same salt for the same unknown name.
"""

from __future__ import annotations

import base64
import json
import logging
import secrets
from collections.abc import Iterable, Mapping
from urllib.parse import quote, unquote

from barnabas.coordination import Check, Delete, KeyExistsError, Put, Storage, VersionConflictError, Versioned
from barnabas.security.scram import MECHANISMS, ScramCredential, ScramMechanism

from .stored_values import CorruptValueError, StoredDocument

__all__ = ["CREDENTIALS_PREFIX", "MOCK_SECRET_KEY", "CredentialStore", "credential_key"]

log = logging.getLogger(__name__)

CREDENTIALS_PREFIX = "credentials/scram/"
MOCK_SECRET_KEY = "credentials_secret"
#: Compare-and-set rounds before a user's change gives up to writers racing it.
_ATTEMPTS = 10


def credential_key(mechanism: str, user: str) -> str:
    return f"{CREDENTIALS_PREFIX}{mechanism}/{quote(user, safe='')}"


def _parse_key(key: str) -> tuple[str, str] | None:
    mechanism, sep, user = key.removeprefix(CREDENTIALS_PREFIX).partition("/")
    return (mechanism, unquote(user)) if sep and mechanism in MECHANISMS else None


def _to_json(credential: ScramCredential) -> bytes:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return json.dumps({
        "salt": b64(credential.salt), "stored_key": b64(credential.stored_key),
        "server_key": b64(credential.server_key), "iterations": credential.iterations,
    }).encode()  # fmt: skip


def _from_json(data: bytes, key: str) -> ScramCredential:
    """The credential stored under ``key``.

    Raises:
        CorruptValueError: the value is not a credential as barnabas writes it.
    """
    document = StoredDocument(data, f"the credential {key}")
    return ScramCredential(
        document.base64_bytes("salt"),
        document.base64_bytes("stored_key"),
        document.base64_bytes("server_key"),
        document.integer("iterations"),
    )


def _readable(key: str, data: bytes) -> ScramCredential | None:
    """The credential, or None (logged) when it does not read: that user then has no credential for
    the mechanism, as if it had been deleted, and cannot authenticate with it; every other user can."""
    try:
        return _from_json(data, key)
    except CorruptValueError as exc:
        log.warning("ignoring %s", exc)
        return None


class CredentialStore:
    """The SCRAM credentials of every user, as last read from coordination."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self._cache: dict[tuple[str, str], ScramCredential] = {}
        self._mock_secret = b""

    @property
    def prefix(self) -> str:
        return CREDENTIALS_PREFIX

    @property
    def mock_secret(self) -> bytes:
        return self._mock_secret

    def scram_credential(self, mechanism: ScramMechanism, username: str) -> ScramCredential | None:
        return self._cache.get((mechanism.name, username))

    def users(self) -> dict[str, dict[str, int]]:
        """user -> mechanism -> iterations, of every credential known."""
        found: dict[str, dict[str, int]] = {}
        for (mechanism, user), credential in sorted(self._cache.items()):
            found.setdefault(user, {})[mechanism] = credential.iterations
        return found

    async def load(self) -> None:
        """Read every credential (at start, and on a watch's Resync) and the cluster's secret."""
        listed = await self._storage.list(CREDENTIALS_PREFIX)
        cache = {}
        for key, versioned in listed.items():
            parsed = _parse_key(key)
            if parsed is not None and (credential := _readable(key, versioned.value)) is not None:
                cache[parsed] = credential
        self._cache = cache
        if not self._mock_secret:
            self._mock_secret = await self._secret()

    async def _secret(self) -> bytes:
        stored = await self._storage.get(MOCK_SECRET_KEY)
        if stored is not None:
            return stored.value
        secret = secrets.token_bytes(32)
        try:
            await self._storage.put_if_absent(MOCK_SECRET_KEY, secret)
        except KeyExistsError:  # another broker wrote it first: use theirs
            stored = await self._storage.get(MOCK_SECRET_KEY)
            assert stored is not None
            return stored.value
        return secret

    async def refresh(self, keys: Iterable[str]) -> None:
        """Re-read the credentials under ``keys`` (a watch's Changed event)."""
        for key in keys:
            parsed = _parse_key(key)
            if parsed is None:
                continue
            versioned = await self._storage.get(key)
            credential = _readable(key, versioned.value) if versioned is not None else None
            if credential is None:
                self._cache.pop(parsed, None)
            else:
                self._cache[parsed] = credential

    async def alter(self, user: str, changes: Mapping[str, ScramCredential | None]) -> list[str]:
        """Set (a credential) or delete (None) ``user``'s credential per mechanism, in one commit.

        Returns:
            The mechanisms whose deletion found nothing to delete (then nothing is written).

        Raises:
            VersionConflictError: other writers kept changing the same keys.
            CoordinationError: coordination cannot be reached.
        """
        keys = {mechanism: credential_key(mechanism, user) for mechanism in changes}
        for _ in range(_ATTEMPTS):
            current = {mechanism: await self._storage.get(key) for mechanism, key in keys.items()}
            missing = [m for m, credential in changes.items() if credential is None and current[m] is None]
            if missing:
                return missing
            checks = [Check(key, _version(current[m])) for m, key in keys.items()]
            ops: list[Put | Delete] = [
                Put(keys[m], _to_json(credential)) if credential is not None else Delete(keys[m])
                for m, credential in changes.items()
            ]
            try:
                await self._storage.commit(checks, ops)
            except VersionConflictError:
                continue
            await self.refresh(keys.values())
            return []
        raise VersionConflictError(credential_key("*", user), f"credentials of {user!r} kept changing under us")


def _version(versioned: Versioned | None) -> int:
    return versioned.version if versioned is not None else 0
