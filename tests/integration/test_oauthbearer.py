"""SASL/OAUTHBEARER on a real broker process, through real clients: signed tokens against a JWKS, and refusals.

One broker serves PLAINTEXT (the harness's) and three OAUTHBEARER listeners: OAUTH (SASL_PLAINTEXT,
Kafka's OAuthBearerValidatorCallbackHandler against a JWKS file, with an expected audience and
issuer), OAUTH_SSL (SASL_SSL, the JWKS fetched over HTTPS from a server on 127.0.0.1 trusted
through the JAAS entry's truststore) and DEV (SASL_PLAINTEXT, no handler: Kafka's default unsecured
validator). confluent-kafka (``oauth_cb``) and kafka-python (``sasl_oauth_token_provider``) produce and
consume; every bad token is answered ``{"status":"invalid_token"}``, logged, and the broker serves on;
a session ends when its token does, and librdkafka re-authenticates before it does (KIP-368).
"""

from __future__ import annotations

import asyncio
import re
import ssl
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer

from barnabas.client import BrokerConnectionError, KafkaClient
from barnabas.protocol import ErrorCode, request_class
from barnabas.security.oauthbearer import OAuthBearerClient
from barnabas.testing import free_ports
from tests.support.kafka_python import with_topic_metadata
from tests.support.oauth import AUDIENCE, ISSUER, Issuer, JwksServer, SigningKey
from tests.support.raw_client import RawKafkaClient
from tests.support.requests import HOST, unique
from tests.support.tls import Certificates, TlsBroker, broker_ssl_settings, make_certificates, produce_and_consume

pytestmark = pytest.mark.timeout(300)

JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3
INVALID = '{"status":"invalid_token"}'


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture(scope="module")
def jwks_server(issuer: Issuer, certs: Certificates) -> Iterator[JwksServer]:
    with JwksServer(issuer, certs.ca) as server:
        yield server


@pytest.fixture(scope="module")
def broker(
    tmp_path_factory: pytest.TempPathFactory, certs: Certificates, issuer: Issuer, jwks_server: JwksServer
) -> Iterator[TlsBroker]:
    jwks_file = issuer.write_jwks(tmp_path_factory.mktemp("jwks") / "jwks.json")
    trusting = JAAS.removesuffix(";") + f' ssl.truststore.type="PEM" ssl.truststore.location="{certs.ca_file}";'
    ports = dict(zip(("OAUTH", "OAUTH_SSL", "DEV"), free_ports(3), strict=True))
    properties = {
        **broker_ssl_settings(certs),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OAUTH:SASL_PLAINTEXT,OAUTH_SSL:SASL_SSL,"
                                          "DEV:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "listener.name.oauth.oauthbearer.sasl.jaas.config": JAAS,
        "listener.name.oauth.oauthbearer.sasl.server.callback.handler.class": HANDLER,
        "listener.name.oauth.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(),
        "listener.name.oauth_ssl.oauthbearer.sasl.jaas.config": trusting,
        "listener.name.oauth_ssl.oauthbearer.sasl.server.callback.handler.class": HANDLER,
        "listener.name.oauth_ssl.sasl.oauthbearer.jwks.endpoint.url": jwks_server.url,
        "listener.name.dev.oauthbearer.sasl.jaas.config": JAAS,
        "admin.listeners": "http://127.0.0.1:0",
        "offsets.topic.replication.factor": "1",
        "group.initial.rebalance.delay.ms": "0",
    }  # fmt: skip
    broker = TlsBroker(tmp_path_factory.mktemp("oauth-broker") / "data", 0, ports, properties=properties)
    broker.start()
    yield broker
    broker.kill()


def oauth_client(bootstrap: str, token: Callable[[], tuple[str, float]], **more: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "OAUTHBEARER",
            "oauth_cb": lambda _config: token(), **more}  # fmt: skip


def token_cb(issuer: Issuer, lifetime_s: float = 300, **claims: Any) -> Callable[[], tuple[str, float]]:
    def make() -> tuple[str, float]:
        return issuer.token(lifetime_s=lifetime_s, **claims), time.time() + lifetime_s

    return make


# -- real clients ------------------------------------------------------------------------------


def test_confluent_kafka_produces_and_consumes_with_a_signed_token(broker: TlsBroker, issuer: Issuer) -> None:
    produce_and_consume(oauth_client(broker.tls_bootstrap("OAUTH"), token_cb(issuer)), 300)


def test_confluent_kafka_over_sasl_ssl_with_the_jwks_fetched_over_https(
    broker: TlsBroker, issuer: Issuer, certs: Certificates, jwks_server: JwksServer
) -> None:
    config = oauth_client(broker.tls_bootstrap("OAUTH_SSL"), token_cb(issuer), **{"security.protocol": "SASL_SSL",
                          "ssl.ca.location": str(certs.ca_file)})  # fmt: skip
    produce_and_consume(config, 300)
    assert jwks_server.requests >= 1


def test_kafka_python_produces_and_consumes_with_a_token_provider(broker: TlsBroker, issuer: Issuer) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Tokens(AbstractTokenProvider):
        def token(self) -> str:
            return issuer.token(sub="bob")

    sasl = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER",
            "sasl_oauth_token_provider": Tokens()}  # fmt: skip
    topic = unique("kafka-python-oauth")
    producer = KafkaProducer(bootstrap_servers=broker.tls_bootstrap("OAUTH"), acks="all", **sasl)
    for i in range(200):
        producer.send(topic, f"m{i}".encode())
    producer.flush(60)
    producer.close()
    consumer = with_topic_metadata(KafkaConsumer(topic, bootstrap_servers=broker.tls_bootstrap("OAUTH"),
                                                 auto_offset_reset="earliest", consumer_timeout_ms=20_000,
                                                 group_id=unique("kafka-python"), **sasl))  # fmt: skip
    try:
        values = [message.value for _, message in zip(range(200), consumer, strict=False)]
    finally:
        consumer.close()
    assert values == [f"m{i}".encode() for i in range(200)]


def test_the_unsecured_listener_takes_librdkafkas_unsigned_development_tokens(broker: TlsBroker) -> None:
    config = {"bootstrap.servers": broker.tls_bootstrap("DEV"), "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanisms": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
              "sasl.oauthbearer.config": "principal=dev"}  # fmt: skip
    produce_and_consume(config, 100)


def metric(broker: TlsBroker, name: str, listener: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{broker.admin_port}/metrics", timeout=10).read().decode()
    found = re.search(rf'^kafka_server_socket_server_metrics_{name}_total{{listener="{listener}"}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def test_librdkafka_re_authenticates_before_its_short_lived_token_ends_the_session(
    broker: TlsBroker, issuer: Issuer
) -> None:
    errors: list[KafkaError] = []
    before = metric(broker, "successful_reauthentication", "OAUTH")
    config = oauth_client(broker.tls_bootstrap("OAUTH"), token_cb(issuer, lifetime_s=2), error_cb=errors.append)
    producer = Producer({**config, "acks": "all"})
    topic = unique("reauth")
    delivered: list[KafkaError | None] = []
    deadline = time.monotonic() + 20
    while metric(broker, "successful_reauthentication", "OAUTH") <= before and time.monotonic() < deadline:
        producer.produce(topic, b"x", on_delivery=lambda err, _: delivered.append(err))
        producer.flush(5)
    assert metric(broker, "successful_reauthentication", "OAUTH") > before, "the broker saw a re-authentication"
    producer.produce(topic, b"after", on_delivery=lambda err, _: delivered.append(err))
    assert producer.flush(10) == 0
    assert delivered and all(err is None for err in delivered), delivered
    assert not [e for e in errors if e.code() == KafkaError._AUTHENTICATION], errors


# -- refusals ------------------------------------------------------------------------------------


async def login(port: int, token: str) -> None:
    async with await KafkaClient.connect(HOST, port, sasl=OAuthBearerClient(token), timeout_s=10):
        pass


def refusals(issuer: Issuer) -> dict[str, tuple[str, str]]:
    """Each bad token with the reason the broker logs for it."""
    other = Issuer([SigningKey("key-1")])
    return {
        "expired": (issuer.token(lifetime_s=-60), "ExpiredSignatureError"),
        "wrong audience": (issuer.token(aud="another-service"), "InvalidAudienceError"),
        "wrong issuer": (issuer.token(iss="https://evil.test"), "InvalidIssuerError"),
        "bad signature": (other.token(), "InvalidSignatureError"),
        "unknown kid": (issuer.token(SigningKey("key-9")), "no key with kid 'key-9'"),
        "alg none": (issuer.unsigned(signature="e30"), "alg 'none' is not allowed"),
        "garbage": ("bm90IGEgdG9rZW4", "malformed JWT"),
    }  # fmt: skip


@pytest.mark.parametrize(
    "case", ["expired", "wrong audience", "wrong issuer", "bad signature", "unknown kid", "alg none", "garbage"]
)
def test_a_bad_token_is_refused_with_kafkas_answer_logged_and_the_broker_serves_on(
    broker: TlsBroker, issuer: Issuer, case: str
) -> None:
    token, reason = refusals(issuer)[case]
    port = broker.tls_listeners["OAUTH"]
    broker.output.clear()
    failed_before = metric(broker, "failed_authentication", "OAUTH")
    started = time.perf_counter()
    with pytest.raises(BrokerConnectionError) as caught:
        asyncio.run(login(port, token))
    assert str(caught.value).endswith(f"SASL OAUTHBEARER authentication failed: {INVALID}")
    assert time.perf_counter() - started >= 0.1, "connection.failed.authentication.delay.ms (100 ms)"
    logged = [line for line in broker.output if "failed authentication" in line]
    assert len(logged) == 1 and "OAUTHBEARER: invalid token" in logged[0] and reason in logged[0], logged
    assert token not in logged[0], "the token is a credential: never logged"
    assert metric(broker, "failed_authentication", "OAUTH") == failed_before + 1
    asyncio.run(login(port, issuer.token()))  # still serving


def test_a_malformed_first_message_gets_the_generic_failure(broker: TlsBroker) -> None:
    with RawKafkaClient.connect(HOST, broker.tls_listeners["OAUTH"]) as raw:
        raw.request(SASL_HANDSHAKE, 1, request_class(SASL_HANDSHAKE, 1)(mechanism="OAUTHBEARER"))
        answer = raw.request(SASL_AUTHENTICATE, 2, request_class(SASL_AUTHENTICATE, 2)(auth_bytes=b"n,,\x01\x01"))
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert answer.error_message == (
            "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER"
        )
        assert raw.is_closed()


def test_confluent_kafka_with_an_expired_token_gets_an_authentication_error(broker: TlsBroker, issuer: Issuer) -> None:
    errors: list[KafkaError] = []
    expired = token_cb(issuer, lifetime_s=-60)
    producer = Producer(oauth_client(broker.tls_bootstrap("OAUTH"), lambda: (expired()[0], time.time() + 60),
                                     error_cb=errors.append, **{"message.timeout.ms": 1500}))  # fmt: skip
    producer.produce(unique("refused"), b"must not land")
    assert producer.flush(10) == 0, "the message fails (timed out) rather than staying queued"
    assert any(error.code() == KafkaError._AUTHENTICATION and INVALID in error.str() for error in errors), errors


def test_the_session_ends_when_the_token_does(broker: TlsBroker, issuer: Issuer) -> None:
    token = issuer.token(lifetime_s=2)
    with RawKafkaClient.connect(HOST, broker.tls_listeners["OAUTH"]) as raw:
        raw.request(SASL_HANDSHAKE, 1, request_class(SASL_HANDSHAKE, 1)(mechanism="OAUTHBEARER"))
        body = request_class(SASL_AUTHENTICATE, 2)(auth_bytes=OAuthBearerClient(token).initial_response())
        answer = raw.request(SASL_AUTHENTICATE, 2, body)
        authenticated_at = time.time()
        assert answer.error_code == ErrorCode.none
        lifetime_s = answer.session_lifetime.total_seconds()
        assert 0 < lifetime_s <= 2, "KIP-368: the session is told to end with the token"
        metadata = request_class(METADATA, 12)(topics=None, allow_auto_topic_creation=False,
                                               include_topic_authorized_operations=False)  # fmt: skip
        assert raw.request(METADATA, 12, metadata).brokers
        broker.output.clear()
        time.sleep(max(0.0, authenticated_at + lifetime_s + 0.05 - time.time()))  # the session's end is a time
        raw.send_request(METADATA, 12, metadata)
        assert raw.is_closed(), "a request after the session ended, without re-authentication"
    assert any("authentication session expired" in line for line in broker.output)


def test_a_key_added_to_the_https_jwks_is_fetched_when_a_token_names_it(
    broker: TlsBroker, issuer: Issuer, jwks_server: JwksServer, certs: Certificates
) -> None:
    rotated = SigningKey(f"key-{unique('rotated')}")
    issuer.keys.append(rotated)
    token = issuer.token(rotated)
    port = broker.tls_listeners["OAUTH_SSL"]
    fetched = jwks_server.requests

    async def login_over_tls() -> None:
        context = ssl.create_default_context(cafile=str(certs.ca_file))
        async with await KafkaClient.connect(HOST, port, sasl=OAuthBearerClient(token), tls=context, timeout_s=10):
            pass

    with pytest.raises(BrokerConnectionError, match=re.escape(INVALID)):
        asyncio.run(login_over_tls())
    deadline = time.monotonic() + 10
    while True:  # the refresh runs on the broker's JWKS thread: the next login after it is accepted
        try:
            asyncio.run(login_over_tls())
            break
        except BrokerConnectionError:
            assert time.monotonic() < deadline, "the new key was never fetched"
    assert jwks_server.requests > fetched
