"""UnregisterBroker (64): forget a removed broker, as ``kafka-cluster.sh unregister --id N`` asks.

Kafka's ControllerApis.handleUnregisterBroker: ALTER on the cluster, else
CLUSTER_AUTHORIZATION_FAILED; an id the cluster does not know gets BROKER_ID_NOT_REGISTERED.
barnabas also refuses, with INVALID_REQUEST and a one-line message, a broker that still runs or
still holds replicas (``cluster.unregister``). Any broker answers it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from barnabas.cluster.unregister import BrokerNotRegisteredError, UnregisterRefusedError, unregister_broker
from barnabas.coordination import CoordinationError
from barnabas.protocol import ErrorCode, Request, encode_response
from barnabas.security.acl import AclOperation

from ..registry import ApiSpec
from ._authorize import cluster_allowed
from ._build import NO_THROTTLE, make, response_types
from ._needs import NodeNeeds
from ._view import view_of

API_KEY = 64

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterBrokerRequest:
    broker_id: int


async def handle(state: NodeNeeds, request: Request) -> bytes:
    types = response_types(API_KEY, request.header.api_version)
    body = view_of(UnregisterBrokerRequest, request.body)
    code, message = await _unregister(state, body.broker_id)
    response = make(types.UnregisterBrokerResponse, throttle_time=NO_THROTTLE, error_code=code, error_message=message)
    return encode_response(request.header.correlation_id, response)


async def _unregister(state: NodeNeeds, broker_id: int) -> tuple[ErrorCode, str | None]:
    if not cluster_allowed(state, AclOperation.ALTER):
        return ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
    node = state.node
    try:
        await unregister_broker(node.storage, node.brokers, node.topics.topics.values(), broker_id)
    except BrokerNotRegisteredError as exc:
        return ErrorCode.broker_id_not_registered, str(exc)
    except UnregisterRefusedError as exc:
        return ErrorCode.invalid_request, str(exc)
    except CoordinationError as exc:
        log.warning("unregistering broker %d failed: %s", broker_id, exc)
        return ErrorCode.unknown_server_error, f"coordination: {exc}"
    log.info("broker %d unregistered: its claim on its log dirs and its cordon are gone", broker_id)
    return ErrorCode.none, None


SPEC = ApiSpec(API_KEY, "UnregisterBroker", 0, 0, handle)
