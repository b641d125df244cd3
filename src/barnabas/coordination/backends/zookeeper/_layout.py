"""Where keys live in ZooKeeper, and how the URL names the ensemble and the chroot.

Rules:

- Every key is one znode directly under ``<chroot>/kv``, its name the key percent-encoded so that it
  is a single path component: ``%`` and ``/``, spaces, control characters and everything outside
  printable ASCII are escaped as UTF-8 ``%XX``; a key that is exactly ``.`` or ``..`` gets its dots
  escaped too. ZooKeeper's ``multi`` cannot create parent znodes, so a flat layout is what lets one
  commit create any set of keys. ``list`` therefore reads all children of one znode: fine for
  metadata-sized key sets (thousands), not for millions (one ``get_children`` reply must fit in
  ``jute.maxbuffer``, 1 MiB by default: roughly 10 000 keys of 100 bytes).
- Our version is the znode's data version plus one (ZooKeeper counts from 0, we from 1).
- A session id is the ZooKeeper session id in hex (``0x…``), as ZooKeeper's own tools print it.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, unquote, urlsplit

__all__ = [
    "DEFAULT_CHROOT",
    "ZooKeeperUrl",
    "format_session_id",
    "key_of",
    "node_name",
    "parse_url",
]

DEFAULT_CHROOT = "/barnabas"
DEFAULT_PORT = 2181
DEFAULT_OP_TIMEOUT_S = 10.0

#: Printable ASCII stays readable in node names; '%' and '/' are the escape and the separator.
_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in "%/")


def node_name(key: str) -> str:
    """The single znode name that stores ``key``.

    Raises:
        ValueError: the empty key (ZooKeeper has no empty node name).
    """
    if not key:
        raise ValueError("the empty key cannot be stored")
    name = quote(key, safe=_SAFE)
    if name in (".", ".."):
        name = name.replace(".", "%2E")
    return name


def key_of(name: str) -> str | None:
    """The key a znode name stores, or None for a name this layout never produces."""
    try:
        key = unquote(name, errors="strict")
    except UnicodeDecodeError:
        return None
    return key if key and node_name(key) == name else None


def format_session_id(session_id: int) -> str:
    return f"{session_id:#x}"


@dataclass(frozen=True, slots=True)
class ZooKeeperUrl:
    """``zookeeper://host:port[,host:port...]/chroot[?op_timeout=seconds]``, parsed."""

    url: str
    hosts: str
    chroot: str
    op_timeout_s: float

    @property
    def kv_path(self) -> str:
        return f"{self.chroot}/kv"

    def path_of(self, key: str) -> str:
        return f"{self.chroot}/kv/{node_name(key)}"


def parse_url(url: str) -> ZooKeeperUrl:
    """Split a backend URL into the kazoo host list and the chroot (default ``/barnabas``).

    ``op_timeout`` (seconds, default 10) bounds how long a call waits for a connection and a reply
    before it raises UnavailableError.

    Raises:
        ValueError: another scheme, no hosts, a bad port, a bad chroot or an unknown parameter.
    """
    parts = urlsplit(url)
    if parts.scheme != "zookeeper":
        raise ValueError(f"{url!r} is not a zookeeper:// URL")
    if not parts.netloc:
        raise ValueError(f"{url!r} names no ZooKeeper host")
    hosts = []
    for host in parts.netloc.split(","):
        name, sep, port = host.rpartition(":")
        if not sep or "]" in port:  # no port (an IPv6 literal's colons sit inside brackets)
            name, port = host, str(DEFAULT_PORT)
        if not name or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{url!r}: bad host:port {host!r}")
        hosts.append(f"{name}:{port}")
    path = parts.path.rstrip("/")
    if not path:
        path = DEFAULT_CHROOT
    components = path.split("/")[1:]
    if any(c in ("", ".", "..") for c in components) or path == "/zookeeper" or path.startswith("/zookeeper/"):
        raise ValueError(f"{url!r}: bad chroot {parts.path!r}")
    op_timeout_s = DEFAULT_OP_TIMEOUT_S
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name != "op_timeout":
            raise ValueError(f"{url!r}: unknown parameter {name!r} (known: op_timeout)")
        try:
            op_timeout_s = float(value)
        except ValueError:
            raise ValueError(f"{url!r}: op_timeout must be a number of seconds") from None
        if not op_timeout_s > 0:
            raise ValueError(f"{url!r}: op_timeout must be positive")
    return ZooKeeperUrl(url=url, hosts=",".join(hosts), chroot=path, op_timeout_s=op_timeout_s)
