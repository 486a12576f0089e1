"""Subject names and version path segments: what is valid, and the errors for what is not."""

from __future__ import annotations

import pytest

from headwater.registry.errors import (
    InvalidSubjectError,
    InvalidVersionError,
    SchemaNotFoundError,
)
from headwater_registry.names import (
    LATEST,
    check_subject,
    java_int,
    parse_schema_id,
    parse_version,
)


def test_latest_and_minus_one_name_the_newest_version() -> None:
    assert parse_version("latest") == parse_version("-1") == LATEST == -1


def test_positive_versions_are_their_numbers() -> None:
    assert [parse_version(v) for v in ("1", "7", "2147483647")] == [1, 7, 2147483647]
    # As Java's Integer.valueOf reads them: a sign, leading zeros, any decimal digits.
    assert [parse_version(v) for v in ("+3", "007", "\u0663")] == [3, 7, 3]


def test_java_int_is_what_integer_value_of_takes() -> None:
    assert [java_int(t) for t in ("-2147483648", "2147483647", "-0", "0" * 40 + "5")] == [
        -(2**31),
        2**31 - 1,
        0,
        5,
    ]
    for text in ("2147483648", "-2147483649", "9" * 5000, "", "+", "-", " 1", "1 ", "1_0", "0x1"):
        assert java_int(text) is None, text


def test_schema_ids_are_java_ints_and_anything_else_is_no_schema() -> None:
    assert parse_schema_id("42") == 42
    assert parse_schema_id("-1") == -1
    for text in ("2147483648", "9223372036854775808", "abc", "1.0"):
        with pytest.raises(SchemaNotFoundError) as raised:
            parse_schema_id(text)
        assert raised.value.error_code == 40403
        assert str(raised.value) == f"Schema {text} not found"


@pytest.mark.parametrize(
    "version",
    ["0", "-2", "abc", "", "1.5", "LATEST", "2147483648", "9223372036854775808", " 1", "1_0", "-0"],
)
def test_any_other_version_is_42202(version: str) -> None:
    with pytest.raises(InvalidVersionError) as raised:
        parse_version(version)
    assert raised.value.error_code == 42202
    assert f"'{version}' is not a valid version id" in str(raised.value)


def test_subjects_may_hold_slashes_colons_and_512_characters() -> None:
    for subject in ("orders-value", "team/orders", ":.ctx:orders", "x" * 512):
        check_subject(subject)


@pytest.mark.parametrize("subject", ["", "a\nb", "tab\there", "del\x7f", "x" * 513])
def test_empty_control_characters_or_too_long_is_42208(subject: str) -> None:
    with pytest.raises(InvalidSubjectError) as raised:
        check_subject(subject)
    assert raised.value.error_code == 42208
