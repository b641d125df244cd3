#!/usr/bin/env bash
# Toxiproxy, the TCP relay the latency faults slow down (tests/fault/test_latency.py): built from its Go
# module through the Go module proxy into .tools/bin, once per version. make fault runs this.
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=v2.5.0
BIN=.tools/bin/toxiproxy-server
STAMP=.tools/bin/.toxiproxy-$VERSION
if [ -x "$BIN" ] && [ -f "$STAMP" ]; then
    exit 0
fi
mkdir -p .tools/bin .tools/build
GOBIN="$PWD/.tools/build" GOFLAGS=-mod=mod go install "github.com/Shopify/toxiproxy/v2/cmd/server@$VERSION"
mv .tools/build/server "$BIN"
rm -f .tools/bin/.toxiproxy-*
touch "$STAMP"
