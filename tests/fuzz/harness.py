"""What a fuzz target is, and how one call of it tells a documented refusal from a finding.

Rules every target keeps:

- A target feeds the input bytes to the real function, as the broker or the proxy would call it,
  and returns normally when that function answered or refused the input with an error it
  documents (``attempt``). Anything else escaping the target is a finding: another exception, a
  failed assertion on what was returned (a round trip, two decoders that must agree, a model).
- Hangs and allocations out of proportion to the input are findings too; the runner catches them
  (a time limit per input, an address-space limit on the process), not the targets.
- A target reads any choices it needs (a version, a flag) from the input itself, so every input
  replays the same way with or without atheris, and a committed corpus file stays a regression test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Target", "attempt"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Target:
    """One fuzzed surface: ``run`` takes one input; ``max_len`` bounds what the fuzzer generates."""

    name: str
    run: Callable[[bytes], None]
    doc: str
    max_len: int = 4096


def attempt(call: Callable[[], T], *documented: type[BaseException]) -> T | None:
    """``call()``, or None when it raised one of the ``documented`` errors; anything else propagates."""
    try:
        return call()
    except documented:
        return None
