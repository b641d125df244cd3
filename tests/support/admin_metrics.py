"""Reading a broker's or proxy node's admin endpoint (``admin.listeners``) from a test."""

from __future__ import annotations

import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

#: Settings that give a server an admin endpoint on a port of its choosing.
ADMIN = {"admin.listeners": "http://127.0.0.1:0"}
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def scrape(port: int) -> Samples:
    status, text = get(port, "/metrics")
    assert status == 200, text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(value for (sample, have), value in samples.items() if sample == name and wanted <= set(have))
