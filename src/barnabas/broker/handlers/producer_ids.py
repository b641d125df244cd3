"""InitProducerId (22) for idempotent producers.

Without a transactional id Kafka hands out a fresh producer id with epoch 0 on every call,
including the KIP-360 epoch-bump form (v3+) that names an existing id: the new id makes the
old one's sequence state irrelevant. Transactional ids need a transaction coordinator, which
barnabas does not have yet; they are refused with a message. With authorization on, a producer
id needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from dataclasses import dataclass

from barnabas.protocol import ErrorCode, Request, encode_response
from barnabas.security.acl import AclOperation, ResourceType

from ..registry import ApiSpec
from ._authorize import allowed_by_type, cluster_allowed
from ._build import NO_THROTTLE, make, response_types
from ._needs import NodeNeeds
from ._view import view_of

API_KEY = 22


@dataclass(frozen=True, slots=True, kw_only=True)
class InitProducerIdRequest:
    transactional_id: str | None
    transaction_timeout_ms: int
    #: v3+ (KIP-360): the id and epoch to bump, -1 for a new producer.
    producer_id: int = -1
    producer_epoch: int = -1


async def handle(state: NodeNeeds, request: Request) -> bytes:
    types = response_types(API_KEY, request.header.api_version)
    body = view_of(InitProducerIdRequest, request.body)
    # Kafka's KafkaApis.handleInitProducerIdRequest: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic.
    if body.transactional_id is None and not (
        cluster_allowed(state, AclOperation.IDEMPOTENT_WRITE, log_denied=False)
        or allowed_by_type(state, AclOperation.WRITE, ResourceType.TOPIC)
    ):
        response = make(
            types.InitProducerIdResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.cluster_authorization_failed,
            producer_id=-1, producer_epoch=-1,
        )  # fmt: skip
    elif body.transactional_id is not None:
        response = make(
            types.InitProducerIdResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.transactional_id_authorization_failed,
            producer_id=-1,
            producer_epoch=-1,
        )
    else:
        producer_id = await state.node.producer_ids.next_id()
        response = make(
            types.InitProducerIdResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            producer_id=producer_id,
            producer_epoch=0,
        )
    return encode_response(request.header.correlation_id, response)


SPEC = ApiSpec(API_KEY, "InitProducerId", 0, 4, handle)
