"""Subject names and version path segments: what is valid, and the errors for what is not."""

from __future__ import annotations

import pytest

from headwater.registry.errors import InvalidSubjectError, InvalidVersionError
from headwater_registry.names import LATEST, check_subject, parse_version


def test_latest_and_minus_one_name_the_newest_version() -> None:
    assert parse_version("latest") == parse_version("-1") == LATEST == -1


def test_positive_versions_are_their_numbers() -> None:
    assert [parse_version(v) for v in ("1", "7", "2147483647")] == [1, 7, 2147483647]


@pytest.mark.parametrize("version", ["0", "-2", "abc", "", "1.5", "LATEST"])
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
