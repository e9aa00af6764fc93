import pytest

from kmirror.kip1279.names import MAX_MIRROR_NAME_LENGTH, validate_mirror_name


@pytest.mark.parametrize("name", ["my-mirror", "a", "dr.east_1", "A" * MAX_MIRROR_NAME_LENGTH, "x.removedx",
                                  "paused", "removed"])
def test_legal(name):
    assert validate_mirror_name(name) is None


@pytest.mark.parametrize(("name", "why"), [
    ("", "empty"), (None, "empty"), (".", "\".\""), ("..", "\".\""),
    ("A" * (MAX_MIRROR_NAME_LENGTH + 1), "longer than 241"),
    ("my mirror", "character"), ("mirror/1", "character"), ("é", "character"),
    ("my-mirror.removed", ".removed"), ("my-mirror.paused", ".paused"), (".paused", ".paused"),
])
def test_illegal(name, why):
    error = validate_mirror_name(name)
    assert error is not None and why in error.message


def test_suffixed_value_is_still_a_legal_topic_style_name():
    assert MAX_MIRROR_NAME_LENGTH + len(".removed") == 249
