"""The proxy's split of a 1 MiB Produce over 3 leaders and merge of a 1 MiB Fetch from 3 brokers: kio vs zero-copy.

In process, no sockets: the work the router does between reading a client's frame and writing the
brokers' parts (Produce), and between reading the brokers' answers and writing the client's
(Fetch). "kio" is the path the proxy took before the zero-copy split: decode the Produce, copy its
records into kio's entity, split, encode each part; receive each Fetch answer as bytes (a copy of a
large frame), decode, merge, rewrite, encode. "zero-copy" is today's: the Produce parts are
written around views of the client's frame, and the Fetch answers are spliced as slices of the
brokers' frames. For each, the median time per operation and two measures of copying: the bytes
of the output that are not views of the input, and the peak of memory allocated during one
operation (tracemalloc; the input frames are allocated before it starts).

    python bench/proxy_split.py [--repeat 50]
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from kio.static.primitive import i32Timedelta

from barnabas.protocol import (
    FetchPartitionResult,
    ProduceRequestData,
    build_record_batch,
    decode_request,
    decode_response,
    encode_fetch_response,
    encode_produce_request_parts,
    encode_request,
    encode_response,
    find_fetch_entries,
    make,
    request_class,
)
from barnabas.proxy.fetch_merge import merge_fetch_entries
from barnabas.proxy.split import PARTITIONED, merge, split

PRODUCE, FETCH = 0, 1
PRODUCE_VERSION, FETCH_VERSION = 9, 12
TOPIC = "bench"
PARTITIONS = 12  # 4 per leader
LEADERS = 3
MIB = 1 << 20


def leader_of(_topic: Any, partition: int) -> int:
    return partition % LEADERS


def batch(partition: int) -> bytes:
    """One RecordBatch of about 1 MiB / PARTITIONS (1 KiB records, incompressible enough)."""
    count = MIB // PARTITIONS // 1024
    values = [(None, bytes((partition * 31 + i * 7 + j) % 251 for j in range(1000))) for i in range(count)]
    return build_record_batch(values, base_timestamp_ms=1_700_000_000_000)


# -- Produce -------------------------------------------------------------------------------------


def produce_frame() -> memoryview:
    """A client's 1 MiB Produce as the proxy reads it: a large frame's own writable buffer."""
    topic_cls = request_class(PRODUCE, PRODUCE_VERSION, "TopicProduceData")
    partition_cls = request_class(PRODUCE, PRODUCE_VERSION, "PartitionProduceData")
    body = request_class(PRODUCE, PRODUCE_VERSION)(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(
            topic_cls(
                name=TOPIC,
                partition_data=tuple(partition_cls(index=p, records=batch(p)) for p in range(PARTITIONS)),
            ),
        ),
    )
    return memoryview(bytearray(encode_request(PRODUCE, PRODUCE_VERSION, 7, "bench", body)[4:]))


def kio_entity(data: ProduceRequestData) -> Any:
    """The proxy's Produce decoding as kio's entity (records copied), as the router built it before."""
    topic_cls = request_class(PRODUCE, PRODUCE_VERSION, "TopicProduceData")
    partition_cls = request_class(PRODUCE, PRODUCE_VERSION, "PartitionProduceData")
    return request_class(PRODUCE, PRODUCE_VERSION)(
        transactional_id=data.transactional_id,
        acks=data.acks,
        timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=data.timeout_ms)),
        topic_data=tuple(
            topic_cls(
                name=t.name,
                partition_data=tuple(
                    partition_cls(index=p.index, records=None if p.records is None else bytes(p.records))
                    for p in t.partition_data
                ),
            )
            for t in data.topic_data
        ),
    )


def produce_kio(frame: memoryview) -> list[list[Any]]:
    request = decode_request(frame)
    subs, _ = split(PARTITIONED[PRODUCE], kio_entity(request.body), leader_of)
    return [[encode_request(PRODUCE, PRODUCE_VERSION, 0, "bench", sub)] for sub in subs.values()]


def produce_zero_copy(frame: memoryview) -> list[list[Any]]:
    request = decode_request(frame)
    subs, _ = split(PARTITIONED[PRODUCE], request.body, leader_of)
    return [encode_produce_request_parts(PRODUCE_VERSION, 0, "bench", sub) for sub in subs.values()]


# -- Fetch ---------------------------------------------------------------------------------------


def fetch_body() -> Any:
    topic_cls = request_class(FETCH, FETCH_VERSION, "FetchTopic")
    partition_cls = request_class(FETCH, FETCH_VERSION, "FetchPartition")
    body = make(
        request_class(FETCH, FETCH_VERSION),
        replica_id=-1, max_wait=datetime.timedelta(milliseconds=500), min_bytes=1, max_bytes=50 * MIB,
        isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
        topics=(make(topic_cls, topic=TOPIC, partitions=tuple(
            make(partition_cls, partition=p, fetch_offset=0, partition_max_bytes=MIB) for p in range(PARTITIONS)
        )),),
    )  # fmt: skip
    return decode_request(encode_request(FETCH, FETCH_VERSION, 7, "bench", body)[4:]).body


def fetch_answers(body: Any) -> list[memoryview]:
    """Each leader's answer to its part, as a broker writes it and the proxy's link reads it (a large frame)."""
    subs, _ = split(PARTITIONED[FETCH], body, leader_of)
    answers = []
    for sub in subs.values():
        topics = [
            (t.topic, [FetchPartitionResult(int(p.partition), 0, 100, 100, 0, [batch(int(p.partition))])
                       for p in t.partitions])
            for t in sub.topics
        ]  # fmt: skip
        chunks = encode_fetch_response(FETCH_VERSION, 1, topics)
        answers.append(memoryview(bytearray(b"".join(bytes(c) for c in chunks)[4:])))
    return answers


def fetch_kio(body: Any, answers: list[memoryview]) -> list[Any]:
    # The broker link handed a non-relay caller bytes (a copy of the large frame), which kio decoded.
    decoded = [decode_response(FETCH, FETCH_VERSION, bytes(answer))[1] for answer in answers]
    merged = merge(PARTITIONED[FETCH], FETCH_VERSION, body, decoded, {})
    return [encode_response(7, merged)]  # rewrite_fetch: the same entity when no node is named


def fetch_zero_copy(body: Any, answers: list[memoryview]) -> list[Any]:
    found = [(answer, find_fetch_entries(answer, FETCH_VERSION)) for answer in answers]
    assert all(entries is not None for _, entries in found)
    return merge_fetch_entries(FETCH_VERSION, 7, body, found, {})  # type: ignore[arg-type]


# -- measuring -----------------------------------------------------------------------------------


def copied(output: list[Any], inputs: list[memoryview]) -> int:
    """Bytes of ``output`` that are not views of an input buffer."""
    sources = [view.obj for view in inputs]
    parts = [part for chunks in output for part in (chunks if isinstance(chunks, list) else [chunks])]
    return sum(len(p) for p in parts if not (isinstance(p, memoryview) and any(p.obj is s for s in sources)))


def measure(run: Callable[[], list[Any]], inputs: list[memoryview], repeat: int) -> dict[str, float]:
    run()  # warm kio's and struct's caches
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    output = run()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"ms": statistics.median(times) * 1000, "copied": copied(output, inputs), "peak": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50, help="timed runs per path (median reported)")
    args = parser.parse_args()
    frame = produce_frame()
    body = fetch_body()
    answers = fetch_answers(body)
    assert b"".join(produce_kio(frame)[0])[4:] == b"".join(produce_zero_copy(frame)[0])
    assert b"".join(fetch_kio(body, answers)) == b"".join(bytes(c) for c in fetch_zero_copy(body, answers))
    rows = [
        ("Produce split", "kio", measure(lambda: produce_kio(frame), [frame], args.repeat)),
        ("Produce split", "zero-copy", measure(lambda: produce_zero_copy(frame), [frame], args.repeat)),
        ("Fetch merge", "kio", measure(lambda: fetch_kio(body, answers), answers, args.repeat)),
        ("Fetch merge", "zero-copy", measure(lambda: fetch_zero_copy(body, answers), answers, args.repeat)),
    ]
    fetch_size = sum(len(a) for a in answers)
    print(f"{PARTITIONS} partitions over {LEADERS} leaders; Produce frame {len(frame)} B, Fetch answers {fetch_size} B")
    print(f"{'operation':<14} {'path':<10} {'median ms':>10} {'bytes copied':>13} {'peak alloc B':>13}")
    for operation, path, result in rows:
        print(f"{operation:<14} {path:<10} {result['ms']:>10.3f} {result['copied']:>13} {result['peak']:>13}")


if __name__ == "__main__":
    main()
