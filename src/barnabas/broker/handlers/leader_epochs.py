"""OffsetForLeaderEpoch (23): the end offset of a leader epoch, for KIP-320 truncation checks.

Consumers (librdkafka, Java) send it after a leader change to validate their position;
followers will use it to truncate divergent logs. Epochs are answered from the partition's
leader epoch cache; fencing follows Fetch (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH).
A principal with CLUSTER_ACTION on the cluster (a follower) may ask about any topic; any other
needs DESCRIBE on each topic, else its partitions get TOPIC_AUTHORIZATION_FAILED (KafkaApis).
"""

from __future__ import annotations

from dataclasses import dataclass

from barnabas.protocol import ErrorCode, Request, encode_response
from barnabas.security.acl import AclOperation, ResourceType

from ..registry import ApiSpec
from ._authorize import allowed_names, cluster_allowed
from ._build import NO_THROTTLE, make, response_types
from ._needs import PartitionNeeds
from ._view import view_of

API_KEY = 23


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetForLeaderPartition:
    partition: int
    current_leader_epoch: int
    leader_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetForLeaderTopic:
    topic: str
    partitions: tuple[OffsetForLeaderPartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetForLeaderEpochRequest:
    topics: tuple[OffsetForLeaderTopic, ...]
    #: v3+: a follower's broker id, or -1 for a consumer; before v3, Kafka's DEBUGGING_REPLICA_ID.
    replica_id: int = -2


def handle(state: PartitionNeeds, request: Request) -> bytes:
    types = response_types(API_KEY, request.header.api_version)
    body = view_of(OffsetForLeaderEpochRequest, request.body)
    names = {topic.topic for topic in body.topics}
    described = (
        names
        if cluster_allowed(state, AclOperation.CLUSTER_ACTION, log_denied=False)
        else allowed_names(state, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    )
    topics = []
    for topic in body.topics:
        partitions = []
        for requested in topic.partitions:
            index = requested.partition
            code, epoch, end_offset = ErrorCode.none, -1, -1
            found = state.partitions.leader_partition(topic.topic, index, requested.current_leader_epoch)
            if topic.topic not in described:
                code = ErrorCode.topic_authorization_failed
            elif isinstance(found, ErrorCode):
                code = found
            else:
                epoch, end_offset = found.log.end_offset_for_epoch(requested.leader_epoch)
            partitions.append(
                make(
                    types.EpochEndOffset,
                    error_code=code,
                    partition=index,
                    leader_epoch=epoch,
                    end_offset=end_offset,
                )
            )
        topics.append(make(types.OffsetForLeaderTopicResult, topic=topic.topic, partitions=tuple(partitions)))
    response = make(types.OffsetForLeaderEpochResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
    return encode_response(request.header.correlation_id, response)


SPEC = ApiSpec(API_KEY, "OffsetForLeaderEpoch", 2, 4, handle)
