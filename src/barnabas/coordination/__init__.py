"""Pluggable coordination (KIP-30): storage, leader election, group membership, listeners.

Backends implement one small contract (``api.Metastore``: versioned keys, atomic commits, sessions
with ephemeral keys, watch hints) and are chosen by URL; the four KIP-30 interfaces are recipes
written once over it. This package knows nothing about Kafka.
"""

from __future__ import annotations

from .api import (
    Changed,
    Check,
    Delete,
    Metastore,
    Op,
    Put,
    Resync,
    Session,
    SessionState,
    Versioned,
    WatchEvent,
)
from .election import Fence, Leader, LeaderElection
from .errors import (
    CoordinationError,
    FencedError,
    KeyExistsError,
    NoSuchKeyError,
    SessionLostError,
    UnavailableError,
    UnsupportedBackendError,
    VersionConflictError,
)
from .listeners import ListenerRegistry, Registration
from .membership import GroupMembership
from .registry import BACKENDS, backend_for, open_metastore
from .session_end import wait_until_lost
from .storage import Storage

__all__ = [
    "BACKENDS",
    "Changed",
    "Check",
    "CoordinationError",
    "Delete",
    "Fence",
    "FencedError",
    "GroupMembership",
    "KeyExistsError",
    "Leader",
    "LeaderElection",
    "ListenerRegistry",
    "Metastore",
    "NoSuchKeyError",
    "Op",
    "Put",
    "Registration",
    "Resync",
    "Session",
    "SessionLostError",
    "SessionState",
    "Storage",
    "UnavailableError",
    "UnsupportedBackendError",
    "VersionConflictError",
    "Versioned",
    "WatchEvent",
    "backend_for",
    "open_metastore",
    "open_storage",
    "wait_until_lost",
]


async def open_storage(url: str) -> Storage:
    """KIP-30 storage on the backend named by ``url`` (see ``open_metastore``)."""
    return Storage(await open_metastore(url))
