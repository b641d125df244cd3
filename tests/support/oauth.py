"""An identity provider for OAUTHBEARER tests: signing keys made per run, their JWKS, tokens, an HTTPS JWKS server.

:class:`SigningKey` is one RSA or EC key with its kid; :class:`Issuer` signs tokens (PyJWT) with
its keys and writes their JWKS. :class:`JwksServer` serves an issuer's JWKS over HTTPS on
127.0.0.1 with a trustme certificate, reading the issuer's keys at each request (so adding a
key is a rotation), and counts the requests.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import trustme
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

__all__ = ["AUDIENCE", "ISSUER", "Issuer", "JwksServer", "SigningKey"]

ISSUER = "https://idp.barnabas.test"
AUDIENCE = "barnabas"


@dataclass
class SigningKey:
    """One private key, its kid and its algorithm."""

    kid: str
    algorithm: str = "RS256"
    private: Any = None

    def __post_init__(self) -> None:
        if self.private is None:
            self.private = (
                ec.generate_private_key(ec.SECP256R1())
                if self.algorithm.startswith("ES")
                else rsa.generate_private_key(public_exponent=65537, key_size=2048)
            )

    def jwk(self) -> dict[str, Any]:
        family = ECAlgorithm if self.algorithm.startswith("ES") else RSAAlgorithm
        return {**family.to_jwk(self.private.public_key(), as_dict=True), "kid": self.kid, "use": "sig",
                "alg": self.algorithm}  # fmt: skip


@dataclass
class Issuer:
    """Signs tokens with its keys; its JWKS lists the public halves of those published."""

    keys: list[SigningKey] = field(default_factory=lambda: [SigningKey("key-1")])

    def jwks(self) -> dict[str, Any]:
        return {"keys": [key.jwk() for key in self.keys]}

    def write_jwks(self, path: Path) -> Path:
        path.write_text(json.dumps(self.jwks()))
        return path

    def claims(self, sub: str = "alice", lifetime_s: float = 300, **extra: Any) -> dict[str, Any]:
        now = int(time.time())
        return {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": int(now + lifetime_s),
                "scope": "produce consume", **extra}  # fmt: skip

    def token(self, key: SigningKey | None = None, headers: dict[str, Any] | None = None, **claims: Any) -> str:
        """A token signed with ``key`` (the first one by default) whose claims are :meth:`claims` plus ``claims``."""
        key = key or self.keys[0]
        payload = {name: value for name, value in self.claims(**claims).items() if value is not None}
        return jwt.encode(payload, key.private, algorithm=key.algorithm, headers={"kid": key.kid, **(headers or {})})

    def unsigned(self, signature: str = "", **claims: Any) -> str:
        """A token with ``alg`` none naming the first key, and ``signature`` as its third section."""

        def part(value: dict[str, Any]) -> str:
            return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

        return f"{part({'alg': 'none', 'kid': self.keys[0].kid})}.{part(self.claims(**claims))}.{signature}"


class JwksServer:
    """The issuer's JWKS at https://127.0.0.1:<port>/jwks, with a certificate from ``ca``."""

    def __init__(self, issuer: Issuer, ca: trustme.CA) -> None:
        self.issuer = issuer
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests += 1
                body = json.dumps(server.issuer.jwks()).encode()
                self.send_response(200 if self.path == "/jwks" else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
        self._http.socket = context.wrap_socket(self._http.socket, server_side=True)
        self._thread = threading.Thread(target=self._http.serve_forever, name="jwks-server", daemon=True)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self._http.server_address[1]}/jwks"

    def __enter__(self) -> JwksServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()
