"""The products and workloads `bench compare` knows, in a module light enough for the CLI's parser."""

from __future__ import annotations

__all__ = ["CLUSTER_WORKLOADS", "PRODUCTS", "WORKLOADS"]

PRODUCTS = ("barnabas", "kafka", "tansu")
WORKLOADS = ("produce", "consume", "latency", "metadata")
#: Workloads that run on clusters of several brokers too; the others on one broker only.
CLUSTER_WORKLOADS = ("produce", "consume")
