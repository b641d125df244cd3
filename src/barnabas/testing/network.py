"""A private network for partition tests: one network namespace per node on a bridge, cut and healed at will.

Each node gets a namespace with one end of a veth pair; the other end joins a bridge in the
caller's namespace, which holds the network's first address: the caller (the test process, its
clients and checkers) reaches every node and is itself a node to cut (``HOST``). The bridge has no
uplink, so servers bound to these addresses are reachable from this host's namespaces only.

Faults are packet filters inside the nodes' namespaces (never the caller's): a cut between two
nodes drops every packet between them, in and out, in one of the two namespaces, so TCP behaves
as on a real partition (connections hang, connects time out; nothing is reset) and heals when
the rules go. ``lossy`` drops a share of a node's packets at random. ``tc netem`` (latency) needs
a kernel module this machine's kernel lacks; ``delay_supported()`` says whether it is there.

Everything needs root, ``ip`` (iproute2) and ``iptables``; ``NetworkUnavailableError`` says which is
missing, so a test can skip with the reason. Namespaces are named after the creating process's
pid; ``close`` removes them, and a new network first removes those a dead process left behind.
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["HOST", "NetNode", "NetworkUnavailableError", "PrivateNetwork"]

PREFIX = "bnb"
#: Where subnets are picked from: 10.(200..249).(0..255).0/24, the first one no interface uses.
FIRST_SUBNET, LAST_SUBNET = 200 * 256, 250 * 256
_counter = itertools.count()


class NetworkUnavailableError(RuntimeError):
    """This machine cannot make private networks (not root, no iproute2 or iptables, namespaces refused)."""


@dataclass(frozen=True)
class NetNode:
    """A node of the network: its namespace (None for the caller's) and its address."""

    name: str
    namespace: str | None
    address: str

    @property
    def exec_prefix(self) -> list[str]:
        """The command prefix that runs a program inside this node's namespace (the pid stays the program's)."""
        return [] if self.namespace is None else ["ip", "netns", "exec", self.namespace]


#: The caller's place on the network (set per network: ``PrivateNetwork.host``); a name for ``cut`` and friends.
HOST = "host"


class PrivateNetwork:
    """A bridge and a namespace per node; ``cut``, ``partition``, ``isolate``, ``lossy`` and ``heal`` change it."""

    def __init__(self) -> None:
        _check_tools()
        _remove_orphans()
        self.tag = f"{os.getpid():x}-{next(_counter):x}"
        self.bridge = f"{PREFIX}{self.tag}"  # bnb<pid>-<n>: at most 12 characters, the pid in hex
        self.subnet = _free_subnet()
        self._addresses = (str(address) for address in self.subnet.hosts())
        self.nodes: dict[str, NetNode] = {}
        self._filtered: set[str] = set()
        try:
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            _run("ip", "link", "set", self.bridge, "up")
            address = next(self._addresses)
            _run("ip", "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", self.bridge)
        except BaseException:
            self.close()
            raise
        self.host = NetNode(HOST, None, address)

    def add(self, name: str) -> NetNode:
        """A new node ``name``: a namespace with loopback up and one address on the bridge."""
        if name in self.nodes or name == HOST:
            raise ValueError(f"node {name!r} already exists")
        namespace = f"{PREFIX}-{os.getpid()}-{self.tag}-{name}"  # bnb-<pid>-...: orphans are found by pid
        outer = f"{self.bridge}x{len(self.nodes)}"  # Linux allows 15 characters
        address = next(self._addresses)
        _run("ip", "netns", "add", namespace)
        node = NetNode(name, namespace, address)
        self.nodes[name] = node
        _run("ip", "link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", namespace)
        _run("ip", "link", "set", outer, "master", self.bridge, "up")
        _run("ip", "-n", namespace, "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", "eth0")
        _run("ip", "-n", namespace, "link", "set", "eth0", "up")
        _run("ip", "-n", namespace, "link", "set", "lo", "up")
        return node

    # --- faults ------------------------------------------------------------------------------

    def cut(self, a: str, b: str) -> None:
        """Drop every packet between nodes ``a`` and ``b`` (either may be ``HOST``), both ways."""
        inside, other = (b, a) if a == HOST else (a, b)
        if inside == HOST:
            raise ValueError("cannot cut the host from itself")
        peer = self._node(other).address
        self._iptables(inside, "-A", "INPUT", "-s", peer, "-j", "DROP")
        self._iptables(inside, "-A", "OUTPUT", "-d", peer, "-j", "DROP")

    def partition(self, *sides: Iterable[str]) -> None:
        """Split the named nodes into ``sides``: every pair on different sides is cut; within a side all talk."""
        groups = [list(side) for side in sides]
        for i, left in enumerate(groups):
            for right in groups[i + 1 :]:
                for a in left:
                    for b in right:
                        self.cut(a, b)

    def isolate(self, name: str, *, keep: Sequence[str] = ()) -> None:
        """Cut ``name`` from every other node (the host too), except those in ``keep``."""
        for other in [HOST, *self.nodes]:
            if other != name and other not in keep:
                self.cut(name, other)

    def lossy(self, name: str, probability: float) -> None:
        """Drop each packet ``name`` sends or receives with ``probability`` (0..1), whoever the peer."""
        share = f"{probability:.4f}"
        for chain in ("INPUT", "OUTPUT"):
            rule = ["-A", chain, "-m", "statistic", "--mode", "random", "--probability", share, "-j", "DROP"]
            self._iptables(name, *rule)

    def heal(self) -> None:
        """Remove every cut and loss: all nodes talk again."""
        for name in sorted(self._filtered):
            _run(*self._node(name).exec_prefix, "iptables", "-F")
        self._filtered.clear()

    # --- life cycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Remove every namespace and the bridge (the veth pairs go with their namespaces)."""
        for node in self.nodes.values():
            if node.namespace is not None:
                _run("ip", "netns", "delete", node.namespace, check=False)
        self.nodes.clear()
        _run("ip", "link", "delete", self.bridge, check=False)

    def __enter__(self) -> PrivateNetwork:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- inside ------------------------------------------------------------------------------

    def _node(self, name: str) -> NetNode:
        if name == HOST:
            return self.host
        try:
            return self.nodes[name]
        except KeyError:
            raise ValueError(f"no node {name!r} on this network") from None

    def _iptables(self, name: str, *rule: str) -> None:
        node = self._node(name)
        if node.namespace is None:
            raise ValueError("faults are made inside a node's namespace, never the host's")
        _run(*node.exec_prefix, "iptables", "-w", *rule)
        self._filtered.add(name)


def delay_supported() -> bool:
    """Whether this kernel has ``tc netem`` (added latency); it is a module some kernels leave out."""
    probe = f"{PREFIX}-{os.getpid()}-netem"
    try:
        _run("ip", "netns", "add", probe)
        added = subprocess.run(
            ["ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
            capture_output=True, check=False,
        )  # fmt: skip
        return added.returncode == 0
    except (NetworkUnavailableError, OSError):
        return False
    finally:
        _run("ip", "netns", "delete", probe, check=False)


def _check_tools() -> None:
    if os.geteuid() != 0:
        raise NetworkUnavailableError("network namespaces need root")
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            raise NetworkUnavailableError(f"{tool} is not installed")


def _run(*command: str, check: bool = True) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise NetworkUnavailableError(f"{' '.join(command)} failed: {done.stderr.strip() or done.returncode}")


def _free_subnet() -> ipaddress.IPv4Network:
    listed = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=True).stdout
    used = {ipaddress.ip_interface(word).network for word in listed.split() if "/" in word and word[0].isdigit()}
    for index in range(FIRST_SUBNET, LAST_SUBNET):
        subnet = ipaddress.IPv4Network(f"10.{index // 256}.{index % 256}.0/24")
        if not any(subnet.overlaps(other) for other in used):
            return subnet
    raise NetworkUnavailableError("no free 10.200-249.x.0/24 subnet")


def _remove_orphans() -> None:
    """Delete namespaces (and so their veths) and bridges that a process now dead left behind."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    for line in listed.splitlines():
        name = line.split()[0] if line.split() else ""
        parts = name.split("-")
        if len(parts) >= 3 and parts[0] == PREFIX and parts[1].isdigit() and not _alive(int(parts[1])):
            _run("ip", "netns", "delete", name, check=False)
    links = subprocess.run(["ip", "-o", "link", "show", "type", "bridge"], capture_output=True, text=True, check=False)
    for line in links.stdout.splitlines():
        bridge = line.split(":")[1].strip().split("@")[0]
        pid = bridge[len(PREFIX) :].split("-")[0]
        if bridge.startswith(PREFIX) and "-" in bridge and _is_hex(pid) and not _alive(int(pid, 16)):
            _run("ip", "link", "delete", bridge, check=False)


def _is_hex(text: str) -> bool:
    return bool(text) and all(c in "0123456789abcdef" for c in text)


def _alive(pid: int) -> bool:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, 0)
        return True
    return False
