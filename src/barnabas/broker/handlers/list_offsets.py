"""ListOffsets (2): earliest, latest, max-timestamp and by-timestamp offsets.

Special timestamps (Kafka's ListOffsetsRequest): -2 earliest (log start), -1 latest (high
watermark; the last stable offset is the same while transactions are absent), -3 the record
with the largest timestamp (v7+, KIP-734), -4 earliest local (v8+, equal to earliest without
tiered storage). A timestamp t >= 0 finds the first record whose timestamp is >= t; the log
finds the batch, and this module looks inside it for the exact record, going on to the next
batches when it holds none (FileRecords.searchForTimestamp: a batch the cleaner emptied keeps its
maxTimestamp). No such record: offset -1, timestamp -1, no error. A topic the principal may not
DESCRIBE gets TOPIC_AUTHORIZATION_FAILED in each of its partitions.

Offsets never go backwards across a leader change (KIP-207, Kafka's Partition.fetchOffsetForTimestamp):
a new leader's high watermark may lag behind its predecessor's until its followers fetch from it, so
while it is below the start of the leader's epoch, a consumer's (not a replica's) latest offset, and a
timestamp lookup finding nothing below it, are OFFSET_NOT_AVAILABLE, which clients retry. A fault run
read a high watermark of 4,600 from a new leader right after its predecessor had acknowledged offset
4,683.
"""

from __future__ import annotations

from dataclasses import dataclass

from barnabas.log import PartitionLog
from barnabas.protocol import ErrorCode, Request, decode_batch_records, encode_response, parse_batch_header
from barnabas.security.acl import AclOperation, ResourceType

from ..registry import ApiSpec
from ._authorize import allowed_names
from ._build import NO_THROTTLE, make, response_types
from ._needs import PartitionNeeds
from ._view import view_of

API_KEY = 2
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL = -1, -2, -3, -4
#: ``replica_id`` of a consumer's request (Kafka's CONSUMER_REPLICA_ID); a replica's names itself.
CONSUMER = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsPartition:
    partition_index: int
    timestamp: int
    #: v4+ (KIP-320).
    current_leader_epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsTopic:
    name: str
    partitions: tuple[ListOffsetsPartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsRequest:
    replica_id: int
    topics: tuple[ListOffsetsTopic, ...]
    #: v2+ (KIP-98); 0 is READ_UNCOMMITTED.
    isolation_level: int = 0


def _first_record_at_or_after(partition_log: PartitionLog, timestamp: int) -> tuple[int, int] | None:
    found = partition_log.offset_for_timestamp(timestamp)
    if found is None:
        return None
    batch_offset, _ = found
    offset = batch_offset
    while True:
        read = partition_log.read(offset, 1, max_offset=partition_log.high_watermark, min_one_batch=True)
        if not read.records:
            return None
        if parse_batch_header(read.records).max_timestamp >= timestamp:
            for record in decode_batch_records(read.records):
                if record.offset >= batch_offset and record.timestamp >= timestamp:
                    return record.offset, record.timestamp
        offset = read.next_offset


def _max_timestamp(partition_log: PartitionLog) -> tuple[int, int] | None:
    """Offset and timestamp of the first record carrying the largest timestamp."""
    found = partition_log.max_timestamp_batch()
    if found is None:
        return None
    batch_offset, max_ts = found
    batch = partition_log.read(batch_offset, 1, max_offset=partition_log.high_watermark, min_one_batch=True).records
    for record in decode_batch_records(batch):
        if record.offset >= batch_offset and record.timestamp == max_ts:
            return record.offset, record.timestamp
    return None


def handle(state: PartitionNeeds, request: Request) -> bytes:
    version = request.header.api_version
    types = response_types(API_KEY, version)
    body = view_of(ListOffsetsRequest, request.body)
    # DESCRIBE on each topic (KafkaApis.handleListOffsetRequest)
    described = allowed_names(state, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in body.topics))
    topics = []
    for topic in body.topics:
        partitions = []
        for requested in topic.partitions:
            index = requested.partition_index
            fields: dict[str, object] = {
                "partition_index": index,
                "error_code": ErrorCode.none,
                "timestamp": -1,
                "offset": -1,
                "leader_epoch": -1,
            }
            if topic.name not in described:
                fields["error_code"] = ErrorCode.topic_authorization_failed
                partitions.append(make(types.ListOffsetsPartitionResponse, **fields))
                continue
            found_partition = state.partitions.leader_partition(topic.name, index, requested.current_leader_epoch)
            if isinstance(found_partition, ErrorCode):
                fields["error_code"] = found_partition
            else:
                partition_log, partition_state = found_partition.log, found_partition.state
                # The high watermark lags behind where this leader's epoch starts (KIP-207, above).
                lagging = body.replica_id == CONSUMER and (
                    found_partition.leader.epoch_start_offset > partition_log.high_watermark
                )
                timestamp = requested.timestamp
                found: tuple[int, int] | None
                if timestamp == LATEST:
                    found = (partition_log.high_watermark, -1)
                elif timestamp in (EARLIEST, EARLIEST_LOCAL):
                    found = (partition_log.log_start_offset, -1)
                elif timestamp == MAX_TIMESTAMP:
                    found = _max_timestamp(partition_log)
                elif timestamp < 0:
                    found = None
                    fields["error_code"] = ErrorCode.invalid_request
                else:
                    found = _first_record_at_or_after(partition_log, timestamp)
                # Lagging, the latest offset and a lookup finding nothing below the high watermark are not
                # given (earliest offsets are, and a bad special timestamp keeps its own error).
                if lagging and (
                    timestamp == LATEST or (found is None and (timestamp >= 0 or timestamp == MAX_TIMESTAMP))
                ):
                    found = None
                    fields["error_code"] = ErrorCode.offset_not_available
                if found is not None:
                    fields.update(offset=found[0], timestamp=found[1], leader_epoch=partition_state.leader_epoch)
            partitions.append(make(types.ListOffsetsPartitionResponse, **fields))
        topics.append(make(types.ListOffsetsTopicResponse, name=topic.name, partitions=tuple(partitions)))
    response = make(types.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
    return encode_response(request.header.correlation_id, response)


SPEC = ApiSpec(API_KEY, "ListOffsets", 1, 8, handle)
