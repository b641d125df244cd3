#!/usr/bin/env bash
# Install the system packages the test suite needs, only those missing (Debian/apt).
# Servers these packages ship are never started as services: tests start their own,
# on loopback ports they pick, and stop them by pid.
set -euo pipefail

need=()
command -v java >/dev/null || need+=(default-jre-headless)
command -v mvn >/dev/null || need+=(maven)
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
command -v etcd >/dev/null || need+=(etcd-server)
command -v etcdctl >/dev/null || need+=(etcd-client)
[[ -f /usr/share/java/zookeeper.jar ]] || need+=(zookeeper)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
# kubectl renders the Kubernetes manifests (kubectl kustomize); any kubectl already there will do.
command -v kubectl >/dev/null || need+=(kubernetes-client)
# The partition tests cut links between network namespaces with packet filters (iproute2 makes the namespaces).
command -v iptables >/dev/null || need+=(iptables)
command -v ip >/dev/null || need+=(iproute2)

if ((${#need[@]} == 0)); then
  exit 0
fi
echo "installing system packages: ${need[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
# Images that forbid starting services (policy-rc.d) still install the packages; that is all we need.
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
