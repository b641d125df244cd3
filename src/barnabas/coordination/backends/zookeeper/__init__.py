"""The ZooKeeper backend: ``zookeeper://host:port[,host:port...]/chroot[?op_timeout=seconds]``.

Needs ZooKeeper 3.5+ (multi, ``ephemeralOwner``) and kazoo 2.11 (``pip install 'barnabas[zookeeper]'``).
The chroot defaults to ``/barnabas`` and is created on open.

How the contract maps onto ZooKeeper (details in each module's header):

- **Keys** (``_layout``): one znode per key directly under ``<chroot>/kv``, the key percent-encoded
  into one node name, because a ``multi`` cannot create parent znodes. Version = data version + 1.
- **Commits** (``_plan``): one ``multi``; Check(k, 0) becomes a ``create`` (or ``create``+``delete``
  when nothing is written to k), other checks a versioned ``set_data``, ``delete`` or ``check``.
- **Sessions** (``_session``): each Session is its own KazooClient and ZooKeeper session, because
  ephemeral znodes belong to the ZooKeeper session that created them; ``ttl_s`` is the negotiated
  session timeout; ``Versioned.session_id`` is the znode's ``ephemeralOwner``.
- **Watches** (``_watcher``): a children watch on ``kv`` and data watches on its children (kazoo
  2.11 has no persistent recursive watches), diffed to ``Changed``; ``Resync`` after reconnects.
- **Threads** (``_connection``): kazoo runs on its own threads; results, states and watch events
  are marshalled onto the event loop. Driver errors are translated in ``map_errors`` only.

Limits, by design:

- ``list`` reads every key under the chroot's ``kv`` znode (about two requests per key; kazoo
  manages ~0.2 ms per pipelined request): fine for metadata-sized sets, thousands of keys, not
  millions. One ``get_children`` reply must fit ``jute.maxbuffer`` (1 MiB by default).
- A commit carries at most ``MAX_COMMIT_BYTES`` (1 MB) of values, and creates ephemeral keys for
  at most one session.
- While no server is reachable a session stays SUSPENDED however long that lasts; it becomes LOST
  only when a server says it expired (or on ``close()``). Servers do not expire sessions while the
  whole ensemble is down.
- The watcher keeps a data watch on every key under the chroot, whatever the watched prefixes; a
  key created and deleted between two of its reads (including every absence check that covers no
  op) makes every watch of the metastore ``Resync``.
"""

from __future__ import annotations

from ...api import Metastore
from ._layout import parse_url
from ._metastore import ZooKeeperMetastore
from ._session import ZooKeeperSession

__all__ = ["ZooKeeperMetastore", "ZooKeeperSession", "open_backend"]


async def open_backend(url: str) -> Metastore:
    """Connect to the ensemble named by ``url``.

    Raises:
        ValueError: the URL is malformed.
        UnavailableError: no server answered within ``op_timeout`` (default 10 s).
    """
    return await ZooKeeperMetastore.open(parse_url(url))
