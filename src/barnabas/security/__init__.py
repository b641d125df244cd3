"""Listener security: TLS contexts from Kafka's ssl.* settings, SASL (PLAIN, SCRAM, OAUTHBEARER), principals."""

from .listeners import PLAINTEXT_CLIENT, ClientSecurity, ListenerSecurity, client_security, listener_security
from .principal import ANONYMOUS, KafkaPrincipal, NoMatchingRuleError, SslPrincipalMapper, distinguished_name
from .sasl import SaslAuthenticator, SaslListener, SaslState
from .sasl_errors import SaslAuthenticationError
from .tls import client_context, server_context

__all__ = [
    "ANONYMOUS",
    "PLAINTEXT_CLIENT",
    "ClientSecurity",
    "KafkaPrincipal",
    "ListenerSecurity",
    "NoMatchingRuleError",
    "SaslAuthenticationError",
    "SaslAuthenticator",
    "SaslListener",
    "SaslState",
    "SslPrincipalMapper",
    "client_context",
    "client_security",
    "distinguished_name",
    "listener_security",
    "server_context",
]
