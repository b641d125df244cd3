"""What a SASL exchange fails with: one exception, a reason for the log and a message for the client."""

from __future__ import annotations

__all__ = ["SaslAuthenticationError"]


class SaslAuthenticationError(ValueError):
    """Authentication failed: the connection is answered SASL_AUTHENTICATION_FAILED and closed.

    ``str(exc)`` is the reason, for the broker's log (it may name the user); ``client_message``
    is what the client is told, which never says whether the user exists (Kafka's
    SaslServerAuthenticator sends a generic message for every credential failure).
    """

    def __init__(self, reason: str, client_message: str | None = None) -> None:
        super().__init__(reason)
        self.client_message = client_message
