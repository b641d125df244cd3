"""ApiVersions (key 18): advertise exactly the registry, with no optional tagged fields.

An unsupported ApiVersions version never reaches this handler: the connection answers it in
the v0 format (see connection.py).
"""

from __future__ import annotations

from barnabas.protocol import ErrorCode, Request, encode_response

from ..registry import ApiSpec
from ._build import NO_THROTTLE, make, response_types
from ._needs import RegistryNeeds

API_KEY = 18


def handle(state: RegistryNeeds, request: Request) -> bytes:
    types = response_types(API_KEY, request.header.api_version)
    keys = tuple(
        types.ApiVersion(api_key=key, min_version=low, max_version=high) for key, low, high in state.registry.versions()
    )
    response = make(types.ApiVersionsResponse, error_code=ErrorCode.none, api_keys=keys, throttle_time=NO_THROTTLE)
    return encode_response(request.header.correlation_id, response)


SPEC = ApiSpec(API_KEY, "ApiVersions", 0, 4, handle)
