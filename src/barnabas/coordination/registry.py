"""Backends chosen by URL scheme (Tansu's builder idea); drivers are imported only when used.

``sqlite:///path``, ``etcd://h:p[,h:p]/prefix``, ``zookeeper://h:p[,h:p]/chroot``,
``postgresql://user@h:p/db[?schema=…]`` and ``cassandra://h[,h][:p]/keyspace``. A backend whose
driver is missing fails with the pip extra that installs it.
"""

from __future__ import annotations

import importlib
from urllib.parse import urlsplit

from .api import Metastore
from .errors import UnsupportedBackendError

__all__ = ["BACKENDS", "backend_for", "open_metastore"]

#: scheme -> (module, pip extra providing its driver, or None when it needs nothing)
BACKENDS: dict[str, tuple[str, str | None]] = {
    "sqlite": ("barnabas.coordination.backends.sqlite", None),
    "etcd": ("barnabas.coordination.backends.etcd", "etcd"),
    "zookeeper": ("barnabas.coordination.backends.zookeeper", "zookeeper"),
    "postgresql": ("barnabas.coordination.backends.postgres", "postgres"),
    "postgres": ("barnabas.coordination.backends.postgres", "postgres"),
    "cassandra": ("barnabas.coordination.backends.cassandra", "cassandra"),
}


def backend_for(url: str) -> tuple[str, str | None]:
    """The module and pip extra serving ``url``.

    Raises:
        UnsupportedBackendError: an unknown scheme.
    """
    scheme = urlsplit(url).scheme
    if scheme not in BACKENDS:
        known = ", ".join(sorted(BACKENDS))
        raise UnsupportedBackendError(f"coordination URL {url!r}: unknown scheme {scheme!r} (known: {known})")
    return BACKENDS[scheme]


async def open_metastore(url: str) -> Metastore:
    """Connect to the backend named by ``url``.

    Raises:
        UnsupportedBackendError: unknown scheme, or the backend's driver is not installed.
        UnavailableError: the backend cannot be reached.
        ValueError: the URL is malformed for its backend.
    """
    module_name, extra = backend_for(url)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = f"; install it with: pip install 'barnabas[{extra}]'" if extra else ""
        raise UnsupportedBackendError(f"the {urlsplit(url).scheme} backend cannot load ({exc}){hint}") from None
    metastore: Metastore = await module.open_backend(url)
    return metastore
