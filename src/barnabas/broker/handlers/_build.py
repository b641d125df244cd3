"""Response entities for any version: the protocol's builders, under the name the handlers use."""

from barnabas.protocol import NO_THROTTLE, make, response_types

__all__ = ["NO_THROTTLE", "make", "response_types"]
