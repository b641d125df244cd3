"""The authorization table (broker/handlers/_authorize.py) covers exactly the APIs the broker serves."""

from __future__ import annotations

from barnabas.broker.handlers import build_registry
from barnabas.broker.handlers._authorize import RULES
from barnabas.protocol import ErrorCode

#: Kafka never authorizes these: a client must reach them before it has a principal.
NEVER_CHECKED = {17, 18, 36}  # SaslHandshake, ApiVersions, SaslAuthenticate


def test_one_row_per_served_api() -> None:
    assert {spec.key for spec in build_registry()} == RULES.keys()


def test_only_the_authentication_apis_are_never_checked() -> None:
    assert {key for key, checks in RULES.items() if not checks} == NEVER_CHECKED


def test_a_denial_answers_an_authorization_error_or_filters() -> None:
    """Every check's error is one of Kafka's authorization errors, or none where Kafka filters silently."""
    errors = {check.error for checks in RULES.values() for check in checks}
    assert errors <= {
        ErrorCode.none,
        ErrorCode.topic_authorization_failed,
        ErrorCode.group_authorization_failed,
        ErrorCode.cluster_authorization_failed,
        ErrorCode.transactional_id_authorization_failed,
    }
