"""The layout rule: one primary per 40 GB of primaries, and the note when an index has more."""

from __future__ import annotations

from suli.layout import PRIMARY_TARGET_BYTES, finer_than_needed, primaries_for

GB = 1024**3


def test_one_primary_until_the_target_then_one_more_per_target() -> None:
    assert primaries_for(0) == 1
    assert primaries_for(14 * GB) == 1  # a million items (bench/RESULTS.md): one primary
    assert primaries_for(PRIMARY_TARGET_BYTES) == 1
    assert primaries_for(PRIMARY_TARGET_BYTES + 1) == 2
    assert primaries_for(3 * PRIMARY_TARGET_BYTES) == 3


def test_a_note_only_for_an_index_split_finer_than_it_needs() -> None:
    assert finer_than_needed(1, 14 * GB) is None
    assert finer_than_needed(2, 60 * GB) is None  # needs two
    note = finer_than_needed(3, int(1.4 * GB))
    assert note is not None and "3 primary shards" in note and "--shards 1" in note
