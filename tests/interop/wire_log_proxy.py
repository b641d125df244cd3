"""A tiny logging TCP proxy for the Kafka protocol: records (client_id, api, version) per request.

A debugging aid for the interop drivers, not used by the tests. Start the broker so that it
*advertises* the proxy's address, so every client connection (bootstrap and per-leader) goes
through the proxy; nothing needs rewriting:

    tansu broker --listener-url tcp://127.0.0.1:19092 \
        --advertised-listener-url tcp://127.0.0.1:19093 --storage-engine memory://tansu/
    python tests/interop/wire_log_proxy.py --listen 127.0.0.1:19093 \
        --upstream 127.0.0.1:19092 --out /tmp/wire.tsv
    BARNABAS_TEST_BOOTSTRAP=127.0.0.1:19093 pytest -m interop tests/integration/test_client_interop.py
    python tests/interop/wire_log_proxy.py --summary /tmp/wire.tsv

Each request becomes one line "conn<TAB>client_id<TAB>api_key<TAB>api_version" in --out; the
interop drivers set client_id to "interop-<client>-<mode>", so --summary groups per run. Only
requests are parsed; responses are passed through untouched.

``--frames FILE`` also records raw request frames as JSON lines (the first of each client family,
API and version, up to 64 KiB): the test vectors in tests/unit/protocol/client_frames.jsonl were
captured this way.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import itertools
import json
import struct
import sys
from typing import TextIO

API_NAMES = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    17: "SaslHandshake",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    21: "DeleteRecords",
    22: "InitProducerId",
    23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    32: "DescribeConfigs",
    33: "AlterConfigs",
    36: "SaslAuthenticate",
    37: "CreatePartitions",
    42: "DeleteGroups",
    60: "DescribeCluster",
    61: "DescribeProducers",
    68: "ConsumerGroupHeartbeat",
    71: "GetTelemetrySubscriptions",
    72: "PushTelemetry",
    75: "DescribeTopicPartitions",
}


class FrameRecorder:
    """Keeps the first request frame of each (client family, api, version), up to 64 KiB."""

    MAX_FRAME = 1 << 16

    def __init__(self, path: str) -> None:
        self._out = open(path, "a", buffering=1)  # noqa: SIM115 - lives as long as the server
        self._seen: set[tuple[str, int, int]] = set()

    def record(self, client_id: str, api_key: int, api_version: int, frame: bytes) -> None:
        # "interop-<client>-<mode>"; the client name may itself contain a dash (kafka-python).
        family = client_id.removeprefix("interop-").rpartition("-")[0] or client_id
        key = (family, api_key, api_version)
        if key in self._seen or len(frame) > self.MAX_FRAME:
            return
        self._seen.add(key)
        entry = {"client": family, "api_key": api_key, "api_version": api_version, "frame": frame.hex()}
        self._out.write(json.dumps(entry) + "\n")


def _split_hostport(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


async def _pump_requests(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    conn: int,
    *,
    out: TextIO,
    client_writer: asyncio.StreamWriter,
    max_apiversions: int | None,
    frames: FrameRecorder | None = None,
) -> None:
    """Copy length-prefixed request frames client→broker, logging each request header."""
    try:
        while True:
            head = await reader.readexactly(4)
            (size,) = struct.unpack(">i", head)
            body = await reader.readexactly(size)
            api_key, api_version = struct.unpack_from(">hh", body, 0)
            client_id = "-"
            if len(body) >= 10:
                (n,) = struct.unpack_from(">h", body, 8)
                if n >= 0:
                    client_id = body[10 : 10 + n].decode("utf-8", "replace")
            out.write(f"{conn}\t{client_id}\t{api_key}\t{api_version}\n")
            out.flush()
            if frames is not None:
                frames.record(client_id, api_key, api_version, body)
            if api_key == 18 and max_apiversions is not None and api_version > max_apiversions:
                # Answer as a correct broker must: UNSUPPORTED_VERSION (35) in a v0-format body that
                # lists the ApiVersions range, so the client retries with a version it can use.
                (correlation_id,) = struct.unpack_from(">i", body, 4)
                reply = struct.pack(">ihihhh", correlation_id, 35, 1, 18, 0, max_apiversions)
                client_writer.write(struct.pack(">i", len(reply)) + reply)
                continue
            writer.write(head + body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _pump_raw(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(1 << 16):
            writer.write(chunk)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def _serve(
    listen: str, upstream: str, out_path: str, max_apiversions: int | None, frames_path: str | None
) -> None:
    counter = itertools.count(1)
    frames = FrameRecorder(frames_path) if frames_path else None
    out = open(out_path, "a", buffering=1)  # noqa: SIM115 - lives as long as the server
    up_host, up_port = _split_hostport(upstream)

    async def handle(c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        conn = next(counter)
        try:
            b_reader, b_writer = await asyncio.open_connection(up_host, up_port)
        except OSError:
            c_writer.close()
            return
        await asyncio.gather(
            _pump_requests(
                c_reader,
                b_writer,
                conn,
                out=out,
                client_writer=c_writer,
                max_apiversions=max_apiversions,
                frames=frames,
            ),
            _pump_raw(b_reader, c_writer),
        )

    host, port = _split_hostport(listen)
    server = await asyncio.start_server(handle, host, port)
    print(f"wire-log proxy {listen} -> {upstream}, logging to {out_path}", flush=True)
    async with server:
        await server.serve_forever()


def summarise(path: str) -> str:
    """Per client_id: each API used with the set of versions seen (and request counts)."""
    seen: dict[str, dict[int, collections.Counter[int]]] = collections.defaultdict(
        lambda: collections.defaultdict(collections.Counter)
    )
    with open(path) as f:
        for line in f:
            _conn, client_id, key, version = line.rstrip("\n").split("\t")
            seen[client_id][int(key)][int(version)] += 1
    lines = []
    for client_id in sorted(seen):
        parts = []
        for key in sorted(seen[client_id]):
            versions = seen[client_id][key]
            vtext = ",".join(f"v{v}" for v in sorted(versions))
            parts.append(f"{API_NAMES.get(key, key)} {vtext} ({sum(versions.values())})")
        lines.append(f"{client_id}: " + "; ".join(parts))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--listen", default="127.0.0.1:19093")
    parser.add_argument("--upstream", default="127.0.0.1:19092")
    parser.add_argument("--out", default="wire.tsv")
    parser.add_argument("--summary", metavar="TSV", help="print a summary of a log file and exit")
    parser.add_argument("--frames", metavar="JSONL", help="also record raw request frames here")
    parser.add_argument(
        "--max-apiversions",
        type=int,
        metavar="N",
        help="answer ApiVersions requests above vN with UNSUPPORTED_VERSION (v0 body) instead of "
        "forwarding them (Tansu 0.6 mis-parses the ApiVersions v5 that kafka-clients 4.4 sends)",
    )
    args = parser.parse_args(argv)
    if args.summary:
        print(summarise(args.summary))
        return 0
    host, _ = _split_hostport(args.listen)
    if not (host.startswith("127.") or host in ("localhost", "::1")):
        print("refusing to listen on a non-loopback address", file=sys.stderr)
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args.listen, args.upstream, args.out, args.max_apiversions, args.frames))
    return 0


if __name__ == "__main__":
    sys.exit(main())
