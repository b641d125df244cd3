"""Build kio response entities for any version from one set of keyword arguments.

Handlers describe a response once; ``make`` keeps only the fields the chosen version has, so
a field added in v5 is simply dropped for v3. Classes come from the version's own kio module.
"""

from __future__ import annotations

import datetime
import functools
import sys
from types import ModuleType
from typing import Any

from kio.index import load_response_schema

__all__ = ["NO_THROTTLE", "make", "response_types"]

NO_THROTTLE = datetime.timedelta(0)


@functools.cache
def response_types(api_key: int, version: int) -> ModuleType:
    """The kio module holding the response classes of (api_key, version)."""
    return sys.modules[load_response_schema(api_key, version).__module__]


_FIELD_NAMES: dict[type, frozenset[str]] = {}


def make(cls: type[Any], **values: Any) -> Any:
    """Instantiate ``cls`` with the subset of ``values`` it declares."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(cls.__dataclass_fields__)
    return cls(**{key: value for key, value in values.items() if key in names})
