"""The admin HTTP endpoint of brokers and proxies: liveness, readiness and Prometheus metrics.

Knows nothing of brokers or proxies: each passes its readiness check and its metric families in
(``barnabas.broker.admin_endpoint``, ``barnabas.proxy.admin_endpoint``). See docs/operations.md.
"""

from ._endpoint import AdminEndpoint, LoopCollector, LoopUnresponsiveError, call_on_loop
from ._requests import TOTAL_TIME_BUCKETS_MS, RequestMetrics

__all__ = [
    "TOTAL_TIME_BUCKETS_MS",
    "AdminEndpoint",
    "LoopCollector",
    "LoopUnresponsiveError",
    "RequestMetrics",
    "call_on_loop",
]
