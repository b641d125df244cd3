"""SCRAM-SHA-256/512: RFC 7677's test vector, the client against the server, and every way the server refuses.

The server is checked to stay failed after any refusal, to fail an unknown user only at the proof
(after the same work as a wrong password, with a salt that is stable per name), and to take the
proof in constant time (hmac.compare_digest, not measured here).
"""

from __future__ import annotations

import base64

import pytest

from barnabas.security import SaslAuthenticationError
from barnabas.security.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramClient,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    credential_from_salted,
    make_credential,
    mock_credential,
    salted_password,
)

# RFC 7677 section 3.
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
SECRET = b"cluster-secret".ljust(32, b"\0")


def server_for(
    users: dict[str, ScramCredential], mechanism: ScramMechanism = SCRAM_SHA_256, nonce: str | None = None
) -> ScramServer:
    return ScramServer(mechanism, lambda m, name: users.get(name) if m is mechanism else None, SECRET,
                       server_nonce=nonce)  # fmt: skip


def rfc_server() -> ScramServer:
    return server_for({"user": make_credential(SCRAM_SHA_256, "pencil", 4096, RFC_SALT)}, nonce=SERVER_NONCE)


def test_rfc_7677_vector_server_side() -> None:
    server = rfc_server()
    assert server.evaluate(CLIENT_FIRST) == SERVER_FIRST
    assert not server.complete
    assert server.evaluate(CLIENT_FINAL) == SERVER_FINAL
    assert server.complete and server.username == "user"


def test_rfc_7677_vector_client_side() -> None:
    client = ScramClient(SCRAM_SHA_256, "user", "pencil", nonce=CLIENT_NONCE)
    assert client.initial_response() == CLIENT_FIRST
    assert client.evaluate_challenge(SERVER_FIRST) == CLIENT_FINAL
    assert client.evaluate_challenge(SERVER_FINAL) is None


def test_a_stored_credential_is_derived_from_the_salted_password_alone() -> None:
    salted = salted_password(SCRAM_SHA_256, "pencil", RFC_SALT, 4096)
    assert credential_from_salted(SCRAM_SHA_256, salted, RFC_SALT, 4096) == make_credential(
        SCRAM_SHA_256, "pencil", 4096, RFC_SALT
    )
    credential = make_credential(SCRAM_SHA_256, "pencil")
    assert b"pencil" not in credential.salt + credential.stored_key + credential.server_key
    assert len(credential.salt) == 32 and credential.iterations == 4096


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512], ids=lambda m: m.name)
@pytest.mark.parametrize("name", ["alice", "a,b=c", "ünïcödé"])
def test_client_and_server_agree(mechanism: ScramMechanism, name: str) -> None:
    server = server_for({name: make_credential(mechanism, "s3cret", 8192)}, mechanism)
    client = ScramClient(mechanism, name, "s3cret")
    final = server.evaluate(client.evaluate_challenge(server.evaluate(client.initial_response())) or b"")
    assert client.evaluate_challenge(final) is None
    assert server.complete and server.username == name


def run(server: ScramServer, client: ScramClient) -> None:
    client_final = client.evaluate_challenge(server.evaluate(client.initial_response()))
    assert client_final is not None
    server.evaluate(client_final)


def test_a_wrong_password_fails_at_the_proof_and_the_server_stays_failed() -> None:
    server = server_for({"alice": make_credential(SCRAM_SHA_256, "right")})
    with pytest.raises(SaslAuthenticationError, match="invalid credentials"):
        run(server, ScramClient(SCRAM_SHA_256, "alice", "wrong"))
    assert not server.complete
    with pytest.raises(SaslAuthenticationError, match="after the exchange failed"):
        server.evaluate(b"c=biws,r=x,p=AAAA")


def test_an_unknown_user_gets_a_stable_made_up_salt_and_fails_only_at_the_proof() -> None:
    first = server_for({}).evaluate(b"n,,n=mallory,r=abc")
    again = server_for({}).evaluate(b"n,,n=mallory,r=abc")
    other = server_for({}).evaluate(b"n,,n=eve,r=abc")

    def salt_and_iterations(message: bytes) -> list[bytes]:
        return message.split(b",")[1:]

    assert salt_and_iterations(first) == salt_and_iterations(again) != salt_and_iterations(other)
    assert salt_and_iterations(first)[1] == b"i=4096"
    assert mock_credential(SCRAM_SHA_256, SECRET, "mallory") != mock_credential(SCRAM_SHA_512, SECRET, "mallory")
    with pytest.raises(SaslAuthenticationError, match="unknown user") as caught:
        run(server_for({}), ScramClient(SCRAM_SHA_256, "mallory", "guess"))
    assert caught.value.client_message is None, "the client hears the same generic message as for a wrong password"


def test_a_client_whose_proof_is_right_for_a_made_up_credential_is_still_refused() -> None:
    """Even a client that somehow knew the mock keys' password cannot log in as a user that does not exist."""
    server = server_for({})
    server.evaluate(b"n,,n=ghost,r=abc")
    nonce = server._nonce  # the made-up credential's proof cannot be forged, so skip to the check
    mock = mock_credential(SCRAM_SHA_256, SECRET, "ghost")
    assert server._credential == mock
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(f"c=biws,r={nonce},p={base64.b64encode(bytes(32)).decode()}".encode())


def started(server: ScramServer | None = None) -> tuple[ScramServer, str]:
    server = server or rfc_server()
    server.evaluate(CLIENT_FIRST)
    return server, CLIENT_NONCE + SERVER_NONCE


PROOF = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        pytest.param(b"", "malformed client-first", id="empty"),
        pytest.param(b"\xff\xfe", "not UTF-8", id="not utf-8"),
        pytest.param(b"n=user,r=abc", "malformed client-first", id="no gs2 header"),
        pytest.param(b"y,,n=user,r=abc", "malformed client-first", id="channel binding flag y"),
        pytest.param(b"p=tls-unique,,n=user,r=abc", "malformed client-first", id="channel binding requested"),
        pytest.param(b"n,,m=ext,n=user,r=abc", "malformed client-first", id="mandatory extension"),
        pytest.param(b"n,,n=,r=abc", "malformed client-first", id="empty user"),
        pytest.param(b"n,,n=user,r=", "malformed client-first", id="empty nonce"),
        pytest.param(b"n,,n=user", "malformed client-first", id="no nonce"),
        pytest.param(b"n,,r=abc,n=user", "malformed client-first", id="swapped attributes"),
        pytest.param(b"n,,n=us=3Fer,r=abc", "malformed user name", id="bad escape"),
        pytest.param(b"n,,n=user,r=abc,tokenauth=true", "extensions", id="delegation token extension"),
        pytest.param(b"n,a=admin,n=user,r=abc", "authorization id differs", id="other authzid"),
    ],
)
def test_malformed_or_refused_client_first_messages(message: bytes, reason: str) -> None:
    server = rfc_server()
    with pytest.raises(SaslAuthenticationError, match=reason):
        server.evaluate(message)
    assert not server.complete


def test_an_authzid_equal_to_the_user_is_accepted() -> None:
    server = rfc_server()
    assert server.evaluate(b"n,a=user,n=user,r=" + CLIENT_NONCE.encode()).startswith(b"r=" + CLIENT_NONCE.encode())


@pytest.mark.parametrize(
    ("final", "reason"),
    [
        pytest.param("", "malformed client-final", id="empty"),
        pytest.param("c=biws,r={nonce}", "malformed client-final", id="no proof"),
        pytest.param("r={nonce},c=biws,p={proof}", "malformed client-final", id="order"),
        pytest.param("c=eSws,r={nonce},p={proof}", "channel binding", id="channel binding y"),
        pytest.param("c=biws,r=" + CLIENT_NONCE + ",p={proof}", "invalid nonce", id="client nonce only"),
        pytest.param("c=biws,r={nonce}x,p={proof}", "invalid nonce", id="longer nonce"),
        pytest.param("c=biws,r=X{nonce},p={proof}", "invalid nonce", id="other nonce"),
        pytest.param("c=biws,r={nonce},p=AAAA", "malformed client proof", id="short proof"),
        pytest.param("c=biws,r={nonce},p=!!!!", "malformed client-final", id="proof not base64"),
        pytest.param("c=biws,r={nonce},p=" + base64.b64encode(bytes(32)).decode(), "invalid credentials",
                     id="zero proof"),
    ],
)  # fmt: skip
def test_malformed_or_wrong_client_final_messages(final: str, reason: str) -> None:
    server, nonce = started()
    with pytest.raises(SaslAuthenticationError, match=reason):
        server.evaluate(final.format(nonce=nonce, proof=PROOF).encode())
    assert not server.complete


def test_the_client_refuses_a_server_that_does_not_know_the_credential() -> None:
    client = ScramClient(SCRAM_SHA_256, "user", "pencil", nonce=CLIENT_NONCE)
    client.evaluate_challenge(SERVER_FIRST)
    with pytest.raises(SaslAuthenticationError, match="signature is wrong"):
        client.evaluate_challenge(b"v=" + base64.b64encode(bytes(32)))


@pytest.mark.parametrize(
    ("server_first", "reason"),
    [
        pytest.param(b"r=someoneelse,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "does not extend", id="foreign nonce"),
        pytest.param(b"r=" + CLIENT_NONCE.encode() + b",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "does not extend",
                     id="nonce not extended"),
        pytest.param(SERVER_FIRST.replace(b"i=4096", b"i=1"), "less than the minimum", id="few iterations"),
        pytest.param(SERVER_FIRST.replace(b",s=W22ZaJ0SNY7soEsUEjb6gQ==", b""), "malformed", id="no salt"),
    ],
)  # fmt: skip
def test_the_client_refuses_bad_server_first_messages(server_first: bytes, reason: str) -> None:
    client = ScramClient(SCRAM_SHA_256, "user", "pencil", nonce=CLIENT_NONCE)
    with pytest.raises(SaslAuthenticationError, match=reason):
        client.evaluate_challenge(server_first)


def test_the_client_reports_a_server_error() -> None:
    client = ScramClient(SCRAM_SHA_256, "user", "pencil", nonce=CLIENT_NONCE)
    client.evaluate_challenge(SERVER_FIRST)
    with pytest.raises(SaslAuthenticationError, match="refused: invalid-proof"):
        client.evaluate_challenge(b"e=invalid-proof")
