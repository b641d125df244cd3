"""A Kafka-protocol proxy: a set of proxy nodes that looks like the whole cluster to every client.

Clients that cannot reach each broker bootstrap from the proxy nodes; the proxy routes each
request to the broker that must serve it (splitting and merging requests that span several
leaders) and rewrites every node id, host and port in the answers to its own nodes'.
"""

from .server import Proxy

__all__ = ["Proxy"]
