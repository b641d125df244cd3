"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): credentials, the server and the client.

Rules this module keeps (Kafka's ScramFormatter, ScramMessages, ScramSaslServer and ScramSaslClient):

- A credential is what the server stores: salt, iteration count, StoredKey = H(HMAC(SaltedPassword,
  "Client Key")) and ServerKey = HMAC(SaltedPassword, "Server Key"), SaltedPassword being
  PBKDF2-HMAC(password, salt, iterations). The password and SaltedPassword are never stored. Hashes
  and PBKDF2 are hashlib's and hmac's, never our own.
- The server takes client-first ``n,[a=authzid],n=user,r=nonce``: no channel binding (gs2 flag
  ``n`` only, as Kafka), no extensions (``tokenauth`` is Kafka's delegation tokens, not built), and
  an authzid that is empty or the user, unless the user is a proxy user (``sasl.proxy.principals``):
  then the authzid names whom it acts for (the principal, once the proxy's own proof is right). It
  answers server-first with the client's nonce extended by its own, the salt and the iterations;
  then takes client-final ``c=…,r=…,p=…``, where ``c`` must be the base64 of the client's gs2
  header and ``r`` the combined nonce, checks the proof and answers server-final ``v=ServerSignature``.
- Every malformed message, nonce mismatch, unknown user or wrong proof raises
  SaslAuthenticationError; a failed server stays failed. Proofs are compared with
  ``hmac.compare_digest``.
- An unknown user gets a credential made up from a per-cluster secret and the name (salt, keys;
  the default iteration count), so the exchange goes the same way and costs the same as for a
  known user whose proof is wrong, and the same name always gets the same salt: nothing tells an
  unknown user from a wrong password (Kafka's mock credentials in ScramSaslServer).
- The client (a broker connecting to another, the proxy) checks the server's nonce starts with its own and
  the server's signature in constant time; a server that answers ``e=…`` or a wrong signature fails it.
  A proxy's client names whom it acts for in the gs2 header (``n,a=<authzid>,``), repeated in ``c=``.
"""

from __future__ import annotations

import base64
import binascii
import enum
import functools
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from .sasl_errors import SaslAuthenticationError

__all__ = [
    "DEFAULT_ITERATIONS",
    "MAX_ITERATIONS",
    "MECHANISMS",
    "ScramClient",
    "ScramCredential",
    "ScramMechanism",
    "ScramServer",
    "make_credential",
    "mock_credential",
    "salted_password",
]

#: Kafka's minimum iterations (ScramMechanism.minIterations) and the most AlterUserScramCredentials accepts.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096
#: Salt length of credentials barnabas makes (and of the made-up ones).
SALT_BYTES = 32


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    """One SCRAM mechanism: its SASL name, hash, and its type byte in the admin APIs."""

    name: str
    hash_name: str
    #: Kafka's ScramMechanism type (1 SCRAM-SHA-256, 2 SCRAM-SHA-512) in Describe/AlterUserScramCredentials.
    type_id: int

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.digest(key, message, self.hash_name)


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256", 1)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512", 2)
MECHANISMS: dict[str, ScramMechanism] = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server stores for one user and mechanism (never the password)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@functools.lru_cache(maxsize=64)
def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2-HMAC with the mechanism's hash.

    Cached: a broker's client logs in with the same password and salt on every connection.
    """
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def credential_from_salted(mechanism: ScramMechanism, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The stored credential of a SaltedPassword (what AlterUserScramCredentials sends)."""
    client_key = mechanism.hmac(salted, b"Client Key")
    return ScramCredential(salt, mechanism.hash(client_key), mechanism.hmac(salted, b"Server Key"), iterations)


def make_credential(
    mechanism: ScramMechanism, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """A new credential for ``password`` with a random salt (unless one is given)."""
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations)


def mock_credential(mechanism: ScramMechanism, secret: bytes, username: str) -> ScramCredential:
    """A made-up credential for a user that does not exist: stable per name, unusable for anyone."""
    name = f"{mechanism.name}\0{username}".encode()
    return ScramCredential(
        salt=hmac.digest(secret, b"salt\0" + name, "sha256")[:SALT_BYTES],
        stored_key=hmac.digest(secret, b"stored\0" + name, mechanism.hash_name),
        server_key=hmac.digest(secret, b"server\0" + name, mechanism.hash_name),
        iterations=DEFAULT_ITERATIONS,
    )


# -- messages (RFC 5802 section 7, Kafka's ScramMessages) ---------------------------------------

_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"  # printable ASCII but ','
_BASE64 = r"[A-Za-z0-9+/]*={0,2}"
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>[^,]*))?,)(?P<bare>n=(?P<name>[^,]+),r=(?P<nonce>{_PRINTABLE})(?P<ext>,.*)?)",
    re.DOTALL,
)
_SERVER_FIRST = re.compile(rf"r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_BASE64}),i=(?P<iterations>[0-9]{{1,9}})(?:,.*)?")
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE})(?:,[a-zA-Z]=[^,]*)*),p=(?P<proof>{_BASE64})"
)
_SERVER_FINAL = re.compile(rf"(?:v=(?P<signature>{_BASE64})|e=(?P<error>[^,]*))(?:,.*)?")


def _decode_name(saslname: str) -> str | None:
    """A saslname with ``=2C`` and ``=3D`` decoded; None when another ``=`` escape is in it (RFC 5802)."""
    parts = saslname.split("=")
    out = [parts[0]]
    for part in parts[1:]:
        if part.startswith("2C"):
            out.append("," + part[2:])
        elif part.startswith("3D"):
            out.append("=" + part[2:])
        else:
            return None
    return "".join(out)


def _encode_name(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


def _b64decode(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def _text(message: bytes, what: str) -> str:
    try:
        return message.decode()
    except UnicodeDecodeError:
        raise SaslAuthenticationError(f"the {what} is not UTF-8") from None


class _ServerStep(enum.Enum):
    CLIENT_FIRST = enum.auto()
    CLIENT_FINAL = enum.auto()
    COMPLETE = enum.auto()
    FAILED = enum.auto()


#: Looks up a user's stored credential for a mechanism; None when the user has none.
CredentialLookup = Callable[[ScramMechanism, str], ScramCredential | None]


class ScramServer:
    """The server side of one SCRAM exchange (Kafka's ScramSaslServer); feed it with :meth:`evaluate`."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        credentials: CredentialLookup,
        mock_secret: bytes,
        *,
        server_nonce: str | None = None,
        proxies: frozenset[str] = frozenset(),
    ) -> None:
        """Args: ``server_nonce`` fixes the server's part of the nonce (RFC test vectors); random otherwise.
        ``proxies`` are the users who may name another in the authzid (``sasl.proxy.principals``)."""
        self.mechanism = mechanism.name
        self._proxies = proxies
        #: The authzid a proxy user acts for; empty when the user acts for itself.
        self.acting_for = ""
        self._server_nonce = server_nonce
        self._scram = mechanism
        self._credentials = credentials
        self._mock_secret = mock_secret
        self._step = _ServerStep.CLIENT_FIRST
        #: The authenticated user, once complete (and, for the log, the claimed one before).
        self.username = ""
        #: A SCRAM credential does not expire: the session is bounded by connections.max.reauth.ms alone.
        self.expires_ms: int | None = None
        self._known_user = False
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._gs2_header = ""
        self._server_first = ""
        self._nonce = ""

    @property
    def complete(self) -> bool:
        return self._step is _ServerStep.COMPLETE

    def evaluate(self, response: bytes) -> bytes:
        """Take the client's next message; return the server's answer.

        Raises:
            SaslAuthenticationError: a malformed message, an unknown user, a wrong proof, or a
                message after the exchange ended or failed.
        """
        step, self._step = self._step, _ServerStep.FAILED  # whatever raises leaves it failed
        if step is _ServerStep.CLIENT_FIRST:
            answer = self._client_first(_text(response, "client-first message"))
            self._step = _ServerStep.CLIENT_FINAL
            return answer
        if step is _ServerStep.CLIENT_FINAL:
            answer = self._client_final(_text(response, "client-final message"))
            self._step = _ServerStep.COMPLETE
            return answer
        raise SaslAuthenticationError(f"unexpected SCRAM message after the exchange {step.name.lower()}")

    def _client_first(self, message: str) -> bytes:
        match = _CLIENT_FIRST.fullmatch(message)
        if match is None:
            raise SaslAuthenticationError("malformed client-first message (gs2 flag n, n=user, r=nonce expected)")
        if match["ext"]:
            raise SaslAuthenticationError("SCRAM extensions (delegation tokens) are not supported")
        username = _decode_name(match["name"])
        authzid = _decode_name(match["authzid"] or "")
        if username is None or authzid is None:
            raise SaslAuthenticationError("malformed user name in the client-first message")
        self.username = username
        if authzid and authzid != username:
            if username not in self._proxies:
                raise SaslAuthenticationError(
                    "the authorization id differs from the user name",
                    "Authentication failed: Client requested an authorization id that is different from username",
                )
            self.acting_for = authzid
        stored = self._credentials(self._scram, username)
        self._known_user = stored is not None
        credential = stored if stored is not None else mock_credential(self._scram, self._mock_secret, username)
        self._credential = credential
        self._gs2_header = match["gs2"]
        self._client_first_bare = match["bare"]
        self._nonce = match["nonce"] + (self._server_nonce or secrets.token_urlsafe(24))
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        return self._server_first.encode()

    def _client_final(self, message: str) -> bytes:
        match = _CLIENT_FINAL.fullmatch(message)
        if match is None:
            raise SaslAuthenticationError("malformed client-final message (c=, r=, p= expected)")
        if match["channel"] != base64.b64encode(self._gs2_header.encode()).decode():
            raise SaslAuthenticationError("the channel binding does not repeat the gs2 header")
        if not hmac.compare_digest(match["nonce"].encode(), self._nonce.encode()):
            raise SaslAuthenticationError("invalid nonce in the client-final message")
        proof = _b64decode(match["proof"])
        scram, credential = self._scram, self._credential
        assert credential is not None
        if proof is None or len(proof) != scram.digest_size:
            raise SaslAuthenticationError("malformed client proof")
        auth_message = f"{self._client_first_bare},{self._server_first},{match['without_proof']}".encode()
        client_signature = scram.hmac(credential.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        proof_ok = hmac.compare_digest(scram.hash(client_key), credential.stored_key)
        server_signature = scram.hmac(credential.server_key, auth_message)
        if not (proof_ok and self._known_user):
            raise SaslAuthenticationError("invalid credentials" if self._known_user else "unknown user")
        self._credential = None
        return b"v=" + base64.b64encode(server_signature)


class _ClientStep(enum.Enum):
    SERVER_FIRST = enum.auto()
    SERVER_FINAL = enum.auto()
    COMPLETE = enum.auto()
    FAILED = enum.auto()


class ScramClient:
    """The client side of one SCRAM exchange (Kafka's ScramSaslClient), for a broker's own connections."""

    def __init__(
        self, mechanism: ScramMechanism, username: str, password: str, nonce: str | None = None, authzid: str = ""
    ) -> None:
        """Args: ``authzid`` names the principal a proxy acts for (RFC 5802's ``a=``); empty: the user itself."""
        self.mechanism = mechanism.name
        self._scram = mechanism
        self._password = password
        self._nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        self._gs2_header = f"n,a={_encode_name(authzid)}," if authzid else "n,,"
        self._client_first_bare = f"n={_encode_name(username)},r={self._nonce}"
        self._step = _ClientStep.SERVER_FIRST
        self._server_signature = b""

    def initial_response(self) -> bytes:
        """client-first-message: no channel binding; the authzid when acting for another."""
        return f"{self._gs2_header}{self._client_first_bare}".encode()

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        """Take the server's message: the client-final message to send, or None once the server is verified.

        Raises:
            SaslAuthenticationError: a malformed server message, a nonce that does not extend ours,
                too few iterations, the server's error, or a wrong server signature.
        """
        step, self._step = self._step, _ClientStep.FAILED
        if step is _ClientStep.SERVER_FIRST:
            answer = self._server_first(_text(challenge, "server-first message"))
            self._step = _ClientStep.SERVER_FINAL
            return answer
        if step is _ClientStep.SERVER_FINAL:
            self._server_final(_text(challenge, "server-final message"))
            self._step = _ClientStep.COMPLETE
            return None
        raise SaslAuthenticationError("unexpected SCRAM message after the exchange ended")

    def _server_first(self, message: str) -> bytes:
        match = _SERVER_FIRST.fullmatch(message)
        salt = _b64decode(match["salt"]) if match is not None else None
        if match is None or not salt:
            raise SaslAuthenticationError("malformed server-first message")
        nonce, iterations = match["nonce"], int(match["iterations"])
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslAuthenticationError("the server's nonce does not extend the client's")
        if iterations < MIN_ITERATIONS:
            raise SaslAuthenticationError(f"{iterations} iterations is less than the minimum {MIN_ITERATIONS}")
        scram = self._scram
        salted = salted_password(scram, self._password, salt, iterations)
        without_proof = f"c={base64.b64encode(self._gs2_header.encode()).decode()},r={nonce}"
        auth_message = f"{self._client_first_bare},{message},{without_proof}".encode()
        client_key = scram.hmac(salted, b"Client Key")
        signature = scram.hmac(scram.hash(client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = scram.hmac(scram.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _server_final(self, message: str) -> None:
        match = _SERVER_FINAL.fullmatch(message)
        if match is None:
            raise SaslAuthenticationError("malformed server-final message")
        if match["error"] is not None:
            raise SaslAuthenticationError(f"the server refused: {match['error']}")
        signature = _b64decode(match["signature"])
        if signature is None or not hmac.compare_digest(signature, self._server_signature):
            raise SaslAuthenticationError("the server's signature is wrong: it does not know the credential")
