from __future__ import annotations

import pytest

from kmirror.testing.consumer_groups import ConsumerGroups


@pytest.fixture
def cg() -> ConsumerGroups:
    return ConsumerGroups()
