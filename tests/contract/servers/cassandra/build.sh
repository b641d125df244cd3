#!/usr/bin/env bash
# Resolve Cassandra (org.apache.cassandra:cassandra-all, version in pom.xml) and its runtime
# dependencies into tests/contract/servers/cassandra/build/lib/*.jar (gitignored).
#
# Idempotent: a no-op when build/.build-stamp matches the hash of pom.xml. Tries an offline build
# first (fast when ~/.m2 already holds everything), then resolves from Maven Central. The contract
# tests' fixture (tests/contract/servers/cassandra.py) runs this and starts one node with
#   java -cp 'build/lib/*' ... org.apache.cassandra.service.CassandraDaemon
set -euo pipefail
cd "$(dirname "$0")"

for tool in java mvn; do
    command -v "$tool" >/dev/null || { echo "build.sh: '$tool' not found on PATH (make test installs it)" >&2; exit 1; }
done

mvn_args=(-B -q package)
want="$(sha256sum pom.xml | cut -d' ' -f1)"
if [[ -f build/.build-stamp && -d build/lib && "$(cat build/.build-stamp)" == "$want" ]]; then
    exit 0
fi

rm -rf build/lib build/.build-stamp   # copy-dependencies never removes a stale jar
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! mvn -o "${mvn_args[@]}" >"$log" 2>&1; then
    if ! mvn "${mvn_args[@]}" >"$log" 2>&1; then
        cat "$log" >&2
        echo "build.sh: maven could not resolve cassandra-all and its dependencies" >&2
        exit 1
    fi
fi
echo "$want" > build/.build-stamp
