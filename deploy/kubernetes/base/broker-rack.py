"""The broker pod's init container: server.properties with broker.rack set to this node's zone.

Usage: python3 broker-rack.py SOURCE DESTINATION (NODE_NAME in the environment, from the downward API).

Rules this script keeps:

- The zone is the node's ``topology.kubernetes.io/zone`` label. The downward API cannot read a
  node's labels, so the script asks the API server for the node (``get nodes``: the ClusterRole in
  rbac.yaml), with the pod's service account token and the cluster's CA, as client-go's in-cluster
  configuration does.
- DESTINATION is SOURCE plus ``broker.rack=<zone>``, written whole (a temporary file, then a
  rename). A node without the label gets SOURCE unchanged: no rack, which Kafka allows (racks only
  steer replica placement), and a line on stderr says so.
- An API error fails the init container (the kubelet retries it): a broker never starts without
  the rack its node has, which would place replicas as if every broker sat in one zone.
- Only the standard library: it runs in the barnabas image, with no client of its own.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

ZONE_LABEL = "topology.kubernetes.io/zone"
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TIMEOUT_S = 10


def api_server(environ: dict[str, str]) -> str:
    """The API server's URL from the variables the kubelet sets in every pod."""
    host, port = environ["KUBERNETES_SERVICE_HOST"], environ["KUBERNETES_SERVICE_PORT"]
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


def read_node(api: str, name: str, token: str, context: ssl.SSLContext | None) -> dict[str, Any]:
    """The Node object ``name`` as the API server returns it."""
    request = urllib.request.Request(
        f"{api}/api/v1/nodes/{urllib.parse.quote(name)}",
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=context) as response:
        node: dict[str, Any] = json.load(response)
    return node


def zone_of(node: dict[str, Any]) -> str | None:
    """The node's zone label, None when it has none."""
    return (node.get("metadata", {}).get("labels") or {}).get(ZONE_LABEL) or None


def with_rack(properties: str, zone: str | None) -> str:
    """``properties`` with ``broker.rack`` appended (a label value needs no properties escaping)."""
    if zone is None:
        return properties
    kept = properties.rstrip("\n")
    return f"{kept}\n\n# from the node's {ZONE_LABEL} label (broker-rack.py)\nbroker.rack={zone}\n"


def write_whole(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    partial.replace(path)


def main(argv: list[str]) -> int:
    source, destination = (Path(arg) for arg in argv)
    node_name = os.environ["NODE_NAME"]
    context = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT / "ca.crt"))
    token = (SERVICE_ACCOUNT / "token").read_text().strip()
    zone = zone_of(read_node(api_server(dict(os.environ)), node_name, token, context))
    if zone is None:
        print(f"node {node_name} has no {ZONE_LABEL} label: broker.rack stays unset", file=sys.stderr)
    else:
        print(f"node {node_name} is in zone {zone}: broker.rack={zone}", file=sys.stderr)
    write_whole(destination, with_rack(source.read_text(), zone))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
