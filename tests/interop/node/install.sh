#!/usr/bin/env bash
# Install the kafkajs interop driver's node_modules from package-lock.json (npm ci).
# Idempotent: a no-op when node_modules/.install-stamp matches the hash of package.json,
# package-lock.json and the node version. kafkajs-lz4 pulls the native `lz4` addon, which
# node-gyp compiles at install time (needs make, g++ and python3; Node headers via npm's nodedir).
set -euo pipefail
cd "$(dirname "$0")"

for tool in node npm; do
    command -v "$tool" >/dev/null || { echo "install.sh: '$tool' not found on PATH (make test installs it)" >&2; exit 1; }
done

want="$({ cat package.json package-lock.json; node --version; } | sha256sum | cut -d' ' -f1)"
if [[ -f node_modules/.install-stamp && "$(cat node_modules/.install-stamp)" == "$want" ]]; then
    exit 0
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! npm ci --no-audit --no-fund >"$log" 2>&1; then
    cat "$log" >&2
    echo "install.sh: npm ci for the kafkajs interop driver failed" >&2
    exit 1
fi
# Fail here, not in the middle of a test, if a codec package did not build.
node -e "require('kafkajs'); require('kafkajs-snappy'); new (require('kafkajs-lz4'))(); require('./zstd_codec')" \
    || { echo "install.sh: kafkajs or a codec package does not load" >&2; exit 1; }
echo "$want" > node_modules/.install-stamp
