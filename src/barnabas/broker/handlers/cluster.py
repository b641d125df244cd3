"""DescribeCluster (60): cluster id, controller and brokers (KIP-700).

Only the broker endpoint type is served; asking for controller endpoints gets
UNSUPPORTED_ENDPOINT_TYPE, as a broker in Kafka 4 answers (KIP-919). The cluster's authorized
operations are answered when asked for, to a principal that may DESCRIBE the cluster (0 to others).
"""

from __future__ import annotations

from dataclasses import dataclass

from barnabas.protocol import AUTHORIZED_OPERATIONS_OMITTED, ErrorCode, Request, encode_response
from barnabas.security.acl import CLUSTER_NAME, AclOperation, ResourceType

from ..registry import ApiSpec
from ..request_context import LISTENER_NAME
from ._authorize import authorized_operations, cluster_allowed
from ._build import NO_THROTTLE, make, response_types
from ._needs import ClusterNeeds
from ._view import view_of

API_KEY = 60
BROKERS_ENDPOINT = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeClusterRequest:
    include_cluster_authorized_operations: bool
    #: v1+ (KIP-919); v0 asks for brokers.
    endpoint_type: int = BROKERS_ENDPOINT


def handle(state: ClusterNeeds, request: Request) -> bytes:
    types = response_types(API_KEY, request.header.api_version)
    body = view_of(DescribeClusterRequest, request.body)
    endpoint_type = body.endpoint_type
    operations = AUTHORIZED_OPERATIONS_OMITTED
    if body.include_cluster_authorized_operations:
        # AuthHelper.computeDescribeClusterResponse: only to a principal that may DESCRIBE the cluster
        operations = 0
        if cluster_allowed(state, AclOperation.DESCRIBE):
            operations = authorized_operations(state, ResourceType.CLUSTER, CLUSTER_NAME)
    brokers = tuple(
        make(
            types.DescribeClusterBroker,
            broker_id=info.broker_id,
            host=endpoint.host,
            port=endpoint.port,
            rack=info.rack,
        )
        for _, (info, endpoint) in sorted(state.node.brokers_on(LISTENER_NAME.get()).items())  # the client's listener
    )
    if endpoint_type != BROKERS_ENDPOINT:
        response = make(
            types.DescribeClusterResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.unsupported_endpoint_type,
            error_message="only broker endpoints are served",
            endpoint_type=endpoint_type,
            cluster_id=state.node.cluster_id,
            controller_id=-1,
            brokers=(),
            cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        )
    else:
        response = make(
            types.DescribeClusterResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            error_message=None,
            endpoint_type=endpoint_type,
            cluster_id=state.node.cluster_id,
            controller_id=state.controller_id,
            brokers=brokers,
            cluster_authorized_operations=operations,
        )
    return encode_response(request.header.correlation_id, response)


SPEC = ApiSpec(API_KEY, "DescribeCluster", 0, 1, handle)
