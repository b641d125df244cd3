"""A Kafka-protocol proxy: a set of proxy nodes that looks like the whole cluster to every client.

Clients that cannot reach each broker bootstrap from the proxy nodes; the proxy routes each
request to the broker that must serve it (splitting and merging requests that span several
leaders) and rewrites every node id, host and port in the answers to its own nodes'. A node
restarts without refusing a client by handing its listening sockets to a new process
(``hot_restart``).
"""

from .handover import check_directory
from .hot_restart import HandoverError, HandoverServer, Takeover, refuse_if_served
from .server import Proxy

__all__ = ["HandoverError", "HandoverServer", "Proxy", "Takeover", "check_directory", "refuse_if_served"]
