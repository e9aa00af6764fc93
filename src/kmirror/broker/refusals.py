"""Resources refused by authorization, answered next to the handler's own results."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any


def with_results(response: Any, field: str, refused: Iterable[Any]) -> Any:
    """`response` with the `refused` results appended to its list `field`."""
    extra = tuple(refused)
    if not extra:
        return response
    return dataclasses.replace(response, **{field: tuple(getattr(response, field)) + extra})
