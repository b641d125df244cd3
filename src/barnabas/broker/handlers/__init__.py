"""One handler module per API domain; ``build_registry`` assembles what ApiVersions advertises."""

from __future__ import annotations

from ..registry import ApiRegistry
from . import (
    acls,
    api_versions,
    client_quotas,
    cluster,
    config_changes,
    configs,
    delete_records,
    describe_topic_partitions,
    fetch,
    group_admin,
    groups,
    leader_epochs,
    leadership,
    list_offsets,
    log_dirs,
    metadata,
    offsets,
    produce,
    producer_ids,
    sasl,
    scram_credentials,
    topics,
    unregister_broker,
)

__all__ = ["build_registry"]


def build_registry() -> ApiRegistry:
    return ApiRegistry(
        [
            api_versions.SPEC,
            metadata.SPEC,
            describe_topic_partitions.SPEC,
            produce.SPEC,
            fetch.SPEC,
            list_offsets.SPEC,
            *topics.SPECS,
            configs.SPEC,
            *config_changes.SPECS,
            cluster.SPEC,
            producer_ids.SPEC,
            leader_epochs.SPEC,
            delete_records.SPEC,
            log_dirs.SPEC,
            *leadership.SPECS,
            *groups.SPECS,
            *group_admin.SPECS,
            *offsets.SPECS,
            *sasl.SPECS,
            *scram_credentials.SPECS,
            *client_quotas.SPECS,
            *acls.SPECS,
            unregister_broker.SPEC,
        ]
    )
