"""Hypothesis settings for the stateful tests: short by default, long under ``make fuzz``.

The default (``BARNABAS_STATEFUL`` unset or ``ci``) keeps each state machine well under 15 s in CI;
``BARNABAS_STATEFUL=fuzz`` (what ``make fuzz`` sets) loads the ``barnabas-stateful-fuzz`` profile:
thousands of runs of up to 100 steps each.
"""

from __future__ import annotations

import os

from hypothesis import settings

__all__ = ["stateful_settings"]

settings.register_profile("barnabas-stateful-ci", deadline=None, print_blob=True)
settings.register_profile(
    "barnabas-stateful-fuzz", max_examples=3000, stateful_step_count=100, deadline=None, print_blob=True
)


def stateful_settings(*, max_examples: int, step_count: int) -> settings:
    """The CI settings with these counts, or the fuzz profile when ``BARNABAS_STATEFUL=fuzz``."""
    if os.environ.get("BARNABAS_STATEFUL") == "fuzz":
        return settings.get_profile("barnabas-stateful-fuzz")
    return settings(
        settings.get_profile("barnabas-stateful-ci"), max_examples=max_examples, stateful_step_count=step_count
    )
