"""What a secured broker refuses, sent as raw Kafka requests over TLS where no client library would send it.

One SecureBroker: SASL_SSL with SCRAM-SHA-512 only, MTLS (``ssl.client.auth=required``) and PLAIN_SSL, a
SASL_SSL listener offering PLAIN alone. Each case checks three things: the refusal is Kafka's (its
error code and message, or for TLS no Kafka answer at all), the broker logs why, and the broker
goes on serving a right login at once.

- A SCRAM client-final with a bad proof from a client that does not abort, and goes on sending
  requests (the authentication bypass a peer broker shipped): answered SASL_AUTHENTICATION_FAILED,
  and nothing after it is served, not even the right proof.
- PLAIN offered on the SCRAM-only listener: UNSUPPORTED_SASL_MECHANISM with the enabled list.
- Garbage tokens: random bytes as a SCRAM client-first, a truncated PLAIN message.
- A SaslAuthenticate token over ``sasl.server.max.receive.size``: closed unanswered (Kafka's
  InvalidReceiveException); one just under it is read, and refused as a login.
- Client certificates that are expired or from an untrusted CA on the mTLS listener: the handshake
  fails, nothing is served, and the broker logs the failed authentication with its reason.
"""

from __future__ import annotations

import base64
import datetime
import random
import ssl
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import trustme

from barnabas.protocol import ErrorCode, request_class
from barnabas.security.scram import MECHANISMS, ScramClient
from tests.support.raw_client import RawKafkaClient
from tests.support.requests import HOST
from tests.support.secure import SCRAM_LOGIN, SecureBroker
from tests.support.tls import Certificates, make_certificates

pytestmark = pytest.mark.timeout(120)

SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3
PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="bob-secret";'
KAFKAS_REFUSAL = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, certs: Certificates) -> Iterator[SecureBroker]:
    properties = {
        "listener.name.plain_ssl.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.plain_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
    }
    started = SecureBroker(tmp_path_factory.mktemp("refusing-broker") / "data", certs, properties,
                           extra_listeners={"PLAIN_SSL": "SASL_SSL"}).start()  # fmt: skip
    yield started
    started.kill()


def connect(broker: SecureBroker, listener: str, leaf: trustme.LeafCert | None = None) -> RawKafkaClient:
    context = ssl.create_default_context(cafile=str(broker.certs.ca_file))
    if leaf is not None:
        leaf.configure_cert(context)
    return RawKafkaClient.connect(HOST, broker.tls_listeners[listener], tls=context)


def handshake(raw: RawKafkaClient, mechanism: str) -> Any:
    return raw.request(SASL_HANDSHAKE, 1, request_class(SASL_HANDSHAKE, 1)(mechanism=mechanism))


def authenticate(token: bytes) -> Any:
    return request_class(SASL_AUTHENTICATE, 2)(auth_bytes=token)


def metadata() -> Any:
    return request_class(METADATA, 12)(topics=None, allow_auto_topic_creation=False,
                                       include_topic_authorized_operations=False)  # fmt: skip


def scram_final(raw: RawKafkaClient, password: str) -> bytes:
    """Handshake and client-first on ``raw``; the client-final message a client with ``password`` sends."""
    client = ScramClient(MECHANISMS["SCRAM-SHA-512"], SCRAM_LOGIN[0], password)
    assert handshake(raw, "SCRAM-SHA-512").error_code == ErrorCode.none
    first = raw.request(SASL_AUTHENTICATE, 2, authenticate(client.initial_response()))
    assert first.error_code == ErrorCode.none, first.error_message
    final = client.evaluate_challenge(first.auth_bytes)
    assert final is not None
    return final


def logs_in_and_is_served(broker: SecureBroker) -> bytes:
    """A right SCRAM login on SASL_SSL is admitted and served Metadata; its client-final message."""
    assert broker.running
    with connect(broker, "SASL_SSL") as raw:
        final = scram_final(raw, SCRAM_LOGIN[1])
        assert raw.request(SASL_AUTHENTICATE, 2, authenticate(final)).error_code == ErrorCode.none
        assert [b.node_id for b in raw.request(METADATA, 12, metadata()).brokers] == [0]
    return final


def logged(broker: SecureBroker, text: str) -> bool:
    return any(text in line for line in broker.output)


# -- SCRAM: a bad proof from a client that does not abort ----------------------------------------------


def with_proof(final: bytes, change: Callable[[bytes], bytes]) -> bytes:
    without_proof, proof = final.rsplit(b",p=", 1)
    return without_proof + b",p=" + base64.b64encode(change(base64.b64decode(proof)))


BAD_FINALS: dict[str, tuple[Callable[[bytes, bytes], bytes], str]] = {
    "one bit of the proof flipped": (lambda right, _: with_proof(right, lambda p: bytes([p[0] ^ 1]) + p[1:]),
                                     "invalid credentials"),
    "a proof of the wrong length": (lambda right, _: with_proof(right, lambda p: p[:-8]), "malformed client proof"),
    "an empty proof": (lambda right, _: with_proof(right, lambda p: b""), "malformed client proof"),
    "an earlier login's final message replayed": (lambda _, earlier: earlier, "invalid nonce"),
}  # fmt: skip


@pytest.mark.parametrize("bad", list(BAD_FINALS))
def test_a_bad_scram_proof_is_refused_and_nothing_after_it_is_served(broker: SecureBroker, bad: str) -> None:
    earlier = logs_in_and_is_served(broker)
    make_final, reason = BAD_FINALS[bad]
    broker.output.clear()
    with connect(broker, "SASL_SSL") as raw:
        right = scram_final(raw, SCRAM_LOGIN[1])
        refused = raw.send_request(SASL_AUTHENTICATE, 2, authenticate(make_final(right, earlier)))
        # The client does not abort: it sends the right proof and a request before reading the refusal.
        raw.send_request(SASL_AUTHENTICATE, 2, authenticate(right))
        raw.send_request(METADATA, 12, metadata())
        answer = raw.read_response(SASL_AUTHENTICATE, 2, refused)
        assert (answer.error_code, answer.error_message) == (
            ErrorCode.sasl_authentication_failed, KAFKAS_REFUSAL.format("SCRAM-SHA-512"),
        )  # fmt: skip
        assert raw.is_closed(), "closed with nothing more answered: no login, no Metadata"
    assert logged(broker, f"on listener SASL_SSL (SCRAM-SHA-512): SCRAM-SHA-512 (user 'alice'): {reason}")
    logs_in_and_is_served(broker)


# -- mechanisms and garbage tokens ---------------------------------------------------------------------


def test_plain_on_the_scram_only_listener_gets_the_enabled_mechanisms(broker: SecureBroker) -> None:
    broker.output.clear()
    with connect(broker, "SASL_SSL") as raw:
        answer = handshake(raw, "PLAIN")
        assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
        assert list(answer.mechanisms) == ["SCRAM-SHA-512"]
        raw.send_request(SASL_AUTHENTICATE, 2, authenticate(b"\0bob\0bob-secret"))
        assert raw.is_closed()
    assert logged(broker, "on listener SASL_SSL (PLAIN): mechanism 'PLAIN' is not enabled")
    logs_in_and_is_served(broker)


@pytest.mark.parametrize(
    ("listener", "mechanism", "token", "reason"),
    [("SASL_SSL", "SCRAM-SHA-512", random.Random(19).randbytes(64) + b"\xff", "the client-first message is not UTF-8"),
     ("SASL_SSL", "SCRAM-SHA-512", b"n,,n=alice", "malformed client-first message"),
     ("PLAIN_SSL", "PLAIN", b"\0bob", "malformed PLAIN message")],
    ids=["random bytes as a SCRAM client-first", "a SCRAM client-first without a nonce", "a truncated PLAIN message"],
)  # fmt: skip
def test_a_garbage_token_is_refused(broker: SecureBroker, listener: str, mechanism: str, token: bytes,
                                    reason: str) -> None:  # fmt: skip
    broker.output.clear()
    with connect(broker, listener) as raw:
        assert handshake(raw, mechanism).error_code == ErrorCode.none
        answer = raw.request(SASL_AUTHENTICATE, 2, authenticate(token))
        assert (answer.error_code, answer.error_message) == (
            ErrorCode.sasl_authentication_failed, KAFKAS_REFUSAL.format(mechanism),
        )  # fmt: skip
        assert raw.is_closed()
    assert logged(broker, f"on listener {listener} ({mechanism}): {mechanism}")
    assert logged(broker, reason)
    logs_in_and_is_served(broker)


def test_a_token_over_the_receive_limit_closes_the_connection_unanswered(broker: SecureBroker) -> None:
    broker.output.clear()
    with connect(broker, "SASL_SSL") as raw:
        assert handshake(raw, "SCRAM-SHA-512").error_code == ErrorCode.none
        raw.send_request(SASL_AUTHENTICATE, 2, authenticate(b"n,,n=alice,r=" + b"x" * 530_000))
        assert raw.is_closed(), "sasl.server.max.receive.size is 512 KiB"
    assert logged(broker, "exceeds")
    with connect(broker, "SASL_SSL") as raw:  # just under the limit: read whole, and refused as a login
        assert handshake(raw, "SCRAM-SHA-512").error_code == ErrorCode.none
        answer = raw.request(SASL_AUTHENTICATE, 2, authenticate(b"n,,n=alice,r=" + b"x" * 500_000 + b","))
        assert answer.error_code == ErrorCode.sasl_authentication_failed
    logs_in_and_is_served(broker)


# -- client certificates ---------------------------------------------------------------------------------


def expired_certificate(certs: Certificates) -> trustme.LeafCert:
    long_ago = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    return certs.ca.issue_cert("client.example", common_name="old", not_before=long_ago,
                               not_after=long_ago + datetime.timedelta(days=30))  # fmt: skip


def untrusted_certificate(_: Certificates) -> trustme.LeafCert:
    return trustme.CA(organization_name="someone else").issue_cert("client.example", common_name="eve")


BAD_LEAVES = pytest.mark.parametrize(
    "make_leaf", [expired_certificate, untrusted_certificate], ids=["expired", "untrusted CA"]
)


def refused_at_tls(broker: SecureBroker, leaf: trustme.LeafCert) -> None:
    """The TLS handshake with ``leaf`` fails: no Kafka answer, the connection ends."""
    # TLS 1.3 ends the client's side of the handshake first; the broker's refusal comes on the next read.
    with pytest.raises((ssl.SSLError, ConnectionError)), connect(broker, "MTLS", leaf) as raw:
        raw.request(18, 3, request_class(18, 3)(client_software_name="raw", client_software_version="1"))


@BAD_LEAVES
def test_mutual_tls_refuses_a_bad_client_certificate(
    broker: SecureBroker, make_leaf: Callable[[Certificates], trustme.LeafCert]
) -> None:
    refused_at_tls(broker, make_leaf(broker.certs))
    with connect(broker, "MTLS", broker.certs.client) as raw:
        assert [b.node_id for b in raw.request(METADATA, 12, metadata()).brokers] == [0]


@BAD_LEAVES
def test_a_refused_client_certificate_is_logged(
    broker: SecureBroker, make_leaf: Callable[[Certificates], trustme.LeafCert]
) -> None:
    broker.output.clear()
    refused_at_tls(broker, make_leaf(broker.certs))
    # The broker logs it once its side of the handshake has failed, a moment after the client's.
    expected = (
        "failed authentication from /127.0.0.1 on listener MTLS (SSL handshake failed): CERTIFICATE_VERIFY_FAILED"
    )
    deadline = time.monotonic() + 10
    while not logged(broker, expected):
        assert time.monotonic() < deadline, "the refused handshake was not logged"
        time.sleep(0.05)
