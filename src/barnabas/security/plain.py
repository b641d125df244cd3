"""SASL/PLAIN (RFC 4616): the server against a listener's JAAS users, and the client.

Rules this module keeps (Kafka's PlainSaslServer, PlainServerCallbackHandler and PlainLoginModule):

- The one client message is ``authzid NUL authcid NUL password`` in UTF-8. The user and the
  password must not be empty; the authzid must be empty or the user, unless the user is one of
  the proxy users (``sasl.proxy.principals``): then it names whom the proxy acts for, and the
  connection's principal is that name once the proxy's own password is right.
- The users are the ``user_<name>="<password>"`` options of the listener's
  ``listener.name.<l>.plain.sasl.jaas.config``; ``username`` and ``password`` there are what this
  broker sends as a client on that listener.
- Passwords are compared with ``hmac.compare_digest`` on their UTF-8 bytes, and an unknown user
  is compared against a dummy of the same length as the password given, so neither the time
  taken nor the client's message tells an unknown user from a wrong password.
- PLAIN sends the password itself: use it on SASL_SSL, or on a network you trust.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from barnabas.config import ConfigError

from .jaas import LoginModule
from .sasl_errors import SaslAuthenticationError

__all__ = ["PLAIN", "PLAIN_LOGIN_MODULE", "PlainClient", "PlainServer", "plain_users"]

PLAIN = "PLAIN"
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_USER_PREFIX = "user_"


def plain_users(module: LoginModule) -> dict[str, str]:
    """The users a PLAIN server accepts: each ``user_<name>`` option of its login module.

    Raises:
        ConfigError: the module is not Kafka's PlainLoginModule.
    """
    if module.name != PLAIN_LOGIN_MODULE:
        raise ConfigError(f"plain.sasl.jaas.config: the login module must be {PLAIN_LOGIN_MODULE}")
    return {key[len(_USER_PREFIX) :]: value for key, value in module.options.items() if key.startswith(_USER_PREFIX)}


class PlainServer:
    """The server side of one PLAIN exchange: one message in, an empty answer out."""

    mechanism = PLAIN
    #: A password does not expire: the session is bounded by connections.max.reauth.ms alone.
    expires_ms: int | None = None

    def __init__(self, users: Mapping[str, str], proxies: frozenset[str] = frozenset()) -> None:
        """Args: ``proxies`` are the users who may name another in the authzid (``sasl.proxy.principals``)."""
        self._users = users
        self._proxies = proxies
        self.username = ""
        #: The authzid a proxy user acts for; empty when the user acts for itself.
        self.acting_for = ""
        self._complete = False
        self._used = False

    @property
    def complete(self) -> bool:
        return self._complete

    def evaluate(self, response: bytes) -> bytes:
        """Check ``authzid NUL user NUL password``; an empty answer when it is right.

        Raises:
            SaslAuthenticationError: malformed, an empty user or password, an authzid that is not
                the user (but from a proxy user), an unknown user or a wrong password; or a second message.
        """
        if self._used:
            raise SaslAuthenticationError("PLAIN takes one message")
        self._used = True
        parts = response.split(b"\0")
        if len(parts) != 3:
            raise SaslAuthenticationError("malformed PLAIN message (authzid NUL user NUL password expected)")
        try:
            authzid, username, password = (part.decode() for part in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationError("the PLAIN message is not UTF-8") from None
        if not username or not password:
            raise SaslAuthenticationError("an empty user name or password")
        self.username = username
        if authzid and authzid != username:
            if username not in self._proxies:
                raise SaslAuthenticationError(
                    "the authorization id differs from the user name",
                    "Authentication failed: Client requested an authorization id that is different from username",
                )
            self.acting_for = authzid
        expected = self._users.get(username)
        given = password.encode()
        matches = hmac.compare_digest(given, expected.encode() if expected is not None else bytes(len(given)))
        if expected is None or not matches:
            raise SaslAuthenticationError("invalid password" if expected is not None else "unknown user")
        self._complete = True
        return b""


class PlainClient:
    """The client side: sends the user and password once (and whom it acts for, as a proxy)."""

    mechanism = PLAIN

    def __init__(self, username: str, password: str, authzid: str = "") -> None:
        """Args: ``authzid`` names the principal a proxy acts for (RFC 4616); empty: the user itself."""
        self._message = authzid.encode() + b"\0" + username.encode() + b"\0" + password.encode()

    def initial_response(self) -> bytes:
        return self._message

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        """The server's (empty) answer ends the exchange.

        Raises:
            SaslAuthenticationError: the server sent something (PLAIN's answer is empty).
        """
        if challenge:
            raise SaslAuthenticationError("PLAIN: unexpected data from the server")
        return None
