"""Merge the brokers' answers to a split Fetch as bytes: each partition's entry a slice of its broker's frame.

``split.merge`` decodes every answer with kio and encodes the merge again, copying each record
set three times. When no answer names a node (nothing to rewrite: ``find_fetch_entries`` found
every entry), the merged answer is instead a fresh header and topic framing in the request's
order around slices of the answers, so the records are never copied. It answers exactly what
``split.merge`` would: every requested partition once, in the request's order; one that no
broker answered gets its error (NOT_LEADER_OR_FOLLOWER unless ``failed`` says otherwise); the
slowest answer's throttle time, the first answer's error code, and session id 0 (the proxy keeps
no fetch sessions).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from barnabas.protocol import (
    ErrorCode,
    FetchEntry,
    FetchResponseEntries,
    encode_fetch_response_entries,
    fetch_error_entry,
)

from .split import PARTITIONED

__all__ = ["merge_fetch_entries"]

_SPEC = PARTITIONED[1]


def merge_fetch_entries(
    version: int,
    correlation_id: int,
    body: Any,
    answers: Sequence[tuple[bytes | bytearray | memoryview, FetchResponseEntries]],
    failed: Mapping[tuple[Any, int], ErrorCode],
) -> list[bytes | memoryview]:
    """The client's answer to the Fetch ``body``, as chunks for ``writelines`` (size prefix included).

    Args:
        answers: each broker's response frame (after its size prefix) and its entries, in the
            order the sub-requests were sent.
        failed: partitions no answer holds and the error to give them.
    """
    found: dict[tuple[str, int], tuple[memoryview, FetchEntry]] = {}
    for frame, entries in answers:
        view = memoryview(frame)
        for name, partitions in entries.topics:
            for entry in partitions:
                found[(name, entry.partition_index)] = (view, entry)
    topics = []
    for topic in getattr(body, _SPEC.topics):
        name = str(getattr(topic, _SPEC.topic))
        chunks = _Chunks()
        partitions = getattr(topic, _SPEC.partitions)
        for partition in partitions:
            index = int(getattr(partition, _SPEC.index))
            hit = found.get((name, index))
            if hit is None:
                code = failed.get((name, index), ErrorCode.not_leader_or_follower)
                chunks.add_bytes(fetch_error_entry(version, index, code))
            else:
                chunks.add_slice(*hit)
        topics.append((name, len(partitions), chunks.done()))
    throttle_ms = max((entries.throttle_time_ms for _, entries in answers), default=0)
    error_code = answers[0][1].error_code if answers else ErrorCode.none
    return encode_fetch_response_entries(
        version, correlation_id, topics, throttle_time_ms=throttle_ms, error_code=error_code, session_id=0
    )


class _Chunks:
    """One topic's entries in order; neighbouring entries of one frame become one slice."""

    __slots__ = ("chunks", "end", "start", "view")

    def __init__(self) -> None:
        self.chunks: list[bytes | memoryview] = []
        self.view: memoryview | None = None
        self.start = self.end = 0

    def add_slice(self, view: memoryview, entry: FetchEntry) -> None:
        if view is self.view and entry.start == self.end:
            self.end = entry.end
            return
        self._flush()
        self.view, self.start, self.end = view, entry.start, entry.end

    def add_bytes(self, data: bytes) -> None:
        self._flush()
        self.chunks.append(data)

    def done(self) -> list[bytes | memoryview]:
        self._flush()
        return self.chunks

    def _flush(self) -> None:
        if self.view is not None:
            self.chunks.append(self.view[self.start : self.end])
            self.view = None
