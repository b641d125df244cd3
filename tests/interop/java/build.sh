#!/usr/bin/env bash
# Build the Java interop driver into tests/interop/java/target/ (interop-driver.jar + lib/*.jar).
#
# Idempotent: a no-op when target/.build-stamp matches the hash of pom.xml, src/ and the
# kafka-clients version. Tries an offline build first (fast when ~/.m2 already holds everything),
# then resolves from Maven Central. KAFKA_CLIENTS_VERSION=4.3.1 ./build.sh builds against another
# kafka-clients release than the pom's default. Run the driver as
#   java -cp 'target/interop-driver.jar:target/lib/*' barnabas.interop.InteropDriver --bootstrap ...
set -euo pipefail
cd "$(dirname "$0")"

for tool in java javac mvn; do
    command -v "$tool" >/dev/null || { echo "build.sh: '$tool' not found on PATH (make test installs it)" >&2; exit 1; }
done

mvn_args=(-B -q package)
if [[ -n "${KAFKA_CLIENTS_VERSION:-}" ]]; then
    mvn_args+=("-Dkafka.version=${KAFKA_CLIENTS_VERSION}")
fi

stamp_of() {
    { cat pom.xml; echo "kafka.version=${KAFKA_CLIENTS_VERSION:-default}";
      find src -type f | LC_ALL=C sort | xargs sha256sum; } | sha256sum | cut -d' ' -f1
}
want="$(stamp_of)"
if [[ -f target/.build-stamp && -f target/interop-driver.jar && -d target/lib \
      && "$(cat target/.build-stamp)" == "$want" ]]; then
    exit 0
fi

rm -rf target/lib target/.build-stamp   # copy-dependencies never removes a stale kafka-clients jar
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! mvn -o "${mvn_args[@]}" >"$log" 2>&1; then
    if ! mvn "${mvn_args[@]}" >"$log" 2>&1; then
        cat "$log" >&2
        echo "build.sh: maven build of the Java interop driver failed" >&2
        exit 1
    fi
fi
echo "$want" > target/.build-stamp
