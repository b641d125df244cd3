"""`barnabas quotas` as a user runs it: real processes against a real broker (kafka-configs.sh's client quotas).

Quotas set, described (all, one entity exactly, every entity of a type, JSON) and removed; a
validate-only change leaves nothing behind; every bad input is one line on stderr and exit 1:
the CLI's own checks (an unknown quota, a value that is not a number, no entity, removing a quota
that is not set) and the broker's refusals passed on (a negative value, a fraction for a byte
rate, an ip quota barnabas does not enforce).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("quotas") / "data").start()
    yield process
    process.kill()


def quotas(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "barnabas", "quotas", *args, "-b", broker.bootstrap],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def ok(broker: BrokerProcess, *args: str) -> str:
    done = quotas(broker, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_quotas_are_set_described_and_removed(broker: BrokerProcess) -> None:
    assert ok(broker, "alter", "--user", "alice", "--client", "app",
              "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2048") == (
        "user alice, client-id app: producer_byte_rate=1048576, consumer_byte_rate=2048\n"
    )  # fmt: skip
    ok(broker, "alter", "--client-defaults", "--add-config", "request_percentage=25.5")
    ok(broker, "alter", "--user-defaults", "--add-config", "producer_byte_rate=1000", "--validate-only")

    listed = json.loads(ok(broker, "describe", "--json"))["quotas"]
    assert listed == [
        {"entity": {"client-id": None}, "quotas": {"request_percentage": 25.5}},
        {"entity": {"user": "alice", "client-id": "app"},
         "quotas": {"consumer_byte_rate": 2048.0, "producer_byte_rate": 1048576.0}},
    ]  # fmt: skip
    # An entity named is that entity only (kafka-configs.sh's containsOnly): alice alone has no quota.
    assert ok(broker, "describe", "--user", "alice") == "no client quotas\n"
    assert ok(broker, "describe", "--entity-type", "clients") == "the default client-id: request_percentage=25.5\n"

    ok(broker, "alter", "--user", "alice", "--client-id", "app", "--delete-config", "consumer_byte_rate")
    assert ok(broker, "describe", "--user", "alice", "--client", "app") == (
        "user alice, client-id app: producer_byte_rate=1048576\n"
    )


#: (alter arguments, the one line it must fail with): the CLI's own checks, then the broker's refusals.
BAD_INPUT = [
    (("--user", "bob", "--add-config", "bogus_rate=1"),
     "barnabas quotas: unknown quota 'bogus_rate' for user bob (one of consumer_byte_rate, "
     "controller_mutation_rate, producer_byte_rate, request_percentage)"),
    (("--user", "bob", "--add-config", "producer_byte_rate=fast"),
     "barnabas quotas: --add-config producer_byte_rate=fast: not a number"),
    (("--user", "bob", "--add-config", "producer_byte_rate"),
     "barnabas quotas: --add-config 'producer_byte_rate': expected KEY=VALUE"),
    (("--add-config", "producer_byte_rate=10"),
     "barnabas quotas: name an entity: --user, --client, --ip or their -defaults"),
    (("--user", "bob", "--delete-config", "request_percentage"),
     "barnabas quotas: user bob has no quota request_percentage to remove"),
    (("--user", "bob", "--add-config", "producer_byte_rate=-5"),
     "barnabas quotas: user bob: INVALID_REQUEST: Quota producer_byte_rate must be greater than 0"),
    (("--client", "app", "--add-config", "consumer_byte_rate=0"),
     "barnabas quotas: client-id app: INVALID_REQUEST: Quota consumer_byte_rate must be greater than 0"),
    (("--user", "bob", "--add-config", "producer_byte_rate=10.5"),
     "barnabas quotas: user bob: INVALID_REQUEST: producer_byte_rate cannot be a fractional value."),
    (("--ip", "10.0.0.1", "--add-config", "connection_creation_rate=10"),
     "barnabas quotas: ip 10.0.0.1: INVALID_REQUEST: ip quotas (connection_creation_rate) are not supported "
     "by barnabas"),
]  # fmt: skip


def test_bad_input_is_one_line_and_changes_nothing(broker: BrokerProcess) -> None:
    with ThreadPoolExecutor(4) as pool:  # independent commands: their start-ups overlap
        done = list(pool.map(lambda args: quotas(broker, "alter", *args), [args for args, _ in BAD_INPUT]))
    failures = [(args, one_line_error(result)) for (args, _), result in zip(BAD_INPUT, done, strict=True)]
    assert failures == [(args, error) for args, error in BAD_INPUT]
    entities = [quota["entity"] for quota in json.loads(ok(broker, "describe", "--json"))["quotas"]]
    assert not [e for e in entities if e in ({"user": "bob"}, {"client-id": "app"}, {"ip": "10.0.0.1"})], entities
