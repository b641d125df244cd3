"""DeleteRecords (21): move a partition's log start offset forward (KIP-107).

Offset -1 means the high watermark. An offset above the high watermark gets
OFFSET_OUT_OF_RANGE. Whole segments below the new log start are removed by retention.
A topic the principal may not DELETE gets TOPIC_AUTHORIZATION_FAILED; an internal topic
(``__consumer_offsets``) INVALID_TOPIC_EXCEPTION whatever the ACLs, as in Kafka.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from barnabas.log import errors as log_errors
from barnabas.protocol import ErrorCode, Request, encode_response
from barnabas.security.acl import AclOperation, ResourceType

from ..registry import ApiSpec
from ._authorize import allowed_names
from ._build import NO_THROTTLE, make, response_types
from ._needs import PartitionNeeds
from ._view import view_of

API_KEY = 21
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteRecordsPartition:
    partition_index: int
    offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteRecordsTopic:
    name: str
    partitions: tuple[DeleteRecordsPartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteRecordsRequest:
    topics: tuple[DeleteRecordsTopic, ...]
    timeout_ms: int


def handle(state: PartitionNeeds, request: Request) -> bytes:
    types = response_types(API_KEY, request.header.api_version)
    body = view_of(DeleteRecordsRequest, request.body)
    deletable = allowed_names(state, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in body.topics))
    topics = []
    for topic in body.topics:
        partitions = []
        internal = (known := state.node.topic(topic.name)) is not None and known.internal
        for requested in topic.partitions:
            index = requested.partition_index
            code, low_watermark = ErrorCode.none, -1
            found = state.partitions.leader_partition(topic.name, index)
            if topic.name not in deletable:
                code = ErrorCode.topic_authorization_failed
            elif internal:  # Kafka's ReplicaManager.deleteRecordsOnLocalLog: whatever the ACLs
                code = ErrorCode.invalid_topic_exception
            elif isinstance(found, ErrorCode):
                code = found
            else:
                partition_log = found.log
                offset = requested.offset
                target = partition_log.high_watermark if offset == -1 else offset
                try:
                    partition_log.delete_records_before(target)
                except log_errors.OffsetOutOfRangeError:
                    code = ErrorCode.offset_out_of_range
                else:
                    log.info("log start offset of %s-%d moved to %d", topic.name, index, target)
                low_watermark = partition_log.log_start_offset
            partitions.append(
                make(
                    types.DeleteRecordsPartitionResult,
                    partition_index=index,
                    low_watermark=low_watermark,
                    error_code=code,
                )
            )
        topics.append(make(types.DeleteRecordsTopicResult, name=topic.name, partitions=tuple(partitions)))
    response = make(types.DeleteRecordsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
    return encode_response(request.header.correlation_id, response)


SPEC = ApiSpec(API_KEY, "DeleteRecords", 0, 2, handle)
