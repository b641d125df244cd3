"""The products and workloads `bench compare` knows, in a module light enough for the CLI's parser."""

from __future__ import annotations

__all__ = ["CLUSTER_WORKLOADS", "NAMES", "PRODUCTS", "PROXIED", "WORKLOADS"]

PRODUCTS = ("barnabas", "barnabas-proxy", "kafka", "tansu")
#: How reports name each product.
NAMES = {"barnabas": "barnabas", "barnabas-proxy": "barnabas via proxy", "kafka": "Kafka", "tansu": "Tansu"}
#: The product measured through one proxy node, and the product it is compared with (the same brokers, direct).
PROXIED = ("barnabas-proxy", "barnabas")
WORKLOADS = ("produce", "consume", "latency", "metadata", "connections")
#: Workloads that run on clusters of several brokers too; the others on one broker only.
CLUSTER_WORKLOADS = ("produce", "consume")
