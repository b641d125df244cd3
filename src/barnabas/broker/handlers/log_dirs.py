"""DescribeLogDirs (35): which partitions each of this broker's log dirs holds, and their sizes.

Kafka's answer, as ``kafka-log-dirs.sh`` and ``Admin.describeLogDirs`` read it: one result per
log dir with its absolute path, every replica in it (leader or follower) with its size in bytes
and its offset lag (how far the log end is behind the high watermark, never negative), and from
v4 the volume's total and usable bytes. Null topics means every partition; a requested partition
this broker does not hold is left out, not an error. A principal that may not DESCRIBE the
cluster gets no result, with CLUSTER_AUTHORIZATION_FAILED from v3 (KafkaApis).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from barnabas.protocol import ErrorCode, Request, encode_response
from barnabas.security.acl import AclOperation

from ..registry import ApiSpec
from ._authorize import cluster_allowed
from ._build import NO_THROTTLE, make, response_types
from ._needs import NodeNeeds
from ._view import view_of

API_KEY = 35


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribableLogDirTopic:
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeLogDirsRequest:
    #: Null means every partition.
    topics: tuple[DescribableLogDirTopic, ...] | None


def _wanted(topics: Iterable[DescribableLogDirTopic] | None) -> set[tuple[str, int]] | None:
    if topics is None:
        return None
    return {(t.topic, p) for t in topics for p in t.partitions}


def _dir_result(state: NodeNeeds, types: Any, log_dir: Path, wanted: set[tuple[str, int]] | None) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for topic, partition in state.node.logs.partitions():
        if state.node.logs.log_dir_of(topic, partition) != log_dir or (
            wanted is not None and (topic, partition) not in wanted
        ):
            continue
        partition_log = state.node.logs.get(topic, partition)
        if partition_log is None:  # deleted since partitions() was read
            continue
        by_topic.setdefault(topic, []).append(
            make(
                types.DescribeLogDirsPartition,
                partition_index=partition,
                partition_size=partition_log.size_bytes,
                offset_lag=max(partition_log.high_watermark - partition_log.log_end_offset, 0),
                is_future_key=False,
            )
        )
    topics = tuple(make(types.DescribeLogDirsTopic, name=t, partitions=tuple(ps)) for t, ps in by_topic.items())
    usage = shutil.disk_usage(log_dir)
    return make(
        types.DescribeLogDirsResult,
        error_code=ErrorCode.none,
        log_dir=str(log_dir),
        topics=topics,
        total_bytes=usage.total,
        usable_bytes=usage.free,
    )


def handle(state: NodeNeeds, request: Request) -> bytes:
    types = response_types(API_KEY, request.header.api_version)
    wanted = _wanted(view_of(DescribeLogDirsRequest, request.body).topics)
    code, results = ErrorCode.cluster_authorization_failed, ()
    if cluster_allowed(state, AclOperation.DESCRIBE):
        code = ErrorCode.none
        results = tuple(_dir_result(state, types, log_dir, wanted) for log_dir in state.node.logs.log_dirs)
    response = make(types.DescribeLogDirsResponse, throttle_time=NO_THROTTLE, error_code=code, results=results)
    return encode_response(request.header.correlation_id, response)


SPEC = ApiSpec(API_KEY, "DescribeLogDirs", 1, 4, handle)
