#!/usr/bin/env bash
# Resolve Apache Kafka's broker (org.apache.kafka:kafka_2.13, version in pom.xml) and its runtime
# dependencies into bench/kafka-server/build/lib/*.jar (gitignored), for `barnabas bench compare`.
#
# Idempotent: a no-op when build/.build-stamp matches the hash of pom.xml. Tries an offline build
# first (fast when ~/.m2 already holds everything), then resolves from Maven Central. The benchmark
# (src/barnabas/benchmark/_kafka.py) formats KRaft storage and starts brokers with
#   java -cp 'build/lib/*' kafka.Kafka server.properties
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
        echo "build.sh: maven could not resolve kafka_2.13 and its dependencies" >&2
        exit 1
    fi
fi
echo "$want" > build/.build-stamp
