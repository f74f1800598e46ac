"""Pure parts of the reindex engine and `suli status`: id diff, conversion, names, rejects."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexer.copying import Converter, diff_sorted, first_difference, same_vector
from indexer.inventory import is_physical
from indexer.rejects import count_rejects
from suli.backends.opensearch.bodies import item_to_doc
from suli.embedding import FakeEmbedder
from suli.errors import IndexingError
from suli.models import Item


@pytest.mark.parametrize(
    ("a", "b", "missing", "extra"),
    [
        ([], [], [], []),
        (["a", "b", "c"], ["a", "b", "c"], [], []),
        (["a", "b", "c"], [], ["a", "b", "c"], []),
        ([], ["x"], [], ["x"]),
        (["a", "c", "e"], ["b", "c", "d", "f"], ["a", "e"], ["b", "d", "f"]),
        (["itm_1", "itm_10", "itm_2"], ["itm_10", "itm_2", "itm_3"], ["itm_1"], ["itm_3"]),
    ],
)
def test_diff_of_sorted_id_streams(
    a: list[str], b: list[str], missing: list[str], extra: list[str]
) -> None:
    assert diff_sorted(iter(a), iter(b)) == (missing, extra)


def test_physical_index_names() -> None:
    assert is_physical("suli-items", "suli-items-v2-20261130092352896376")
    assert is_physical("suli-items", "suli-items-v13-20261130092352")
    assert not is_physical("suli-items", "suli-items")
    assert not is_physical("suli-items", "suli-acl")
    assert not is_physical("suli-items", "suli-items-v2-2026")  # not a timestamp
    assert not is_physical("suli-items", "other-suli-items-v2-20261130092352896376")
    assert not is_physical("s.i", "sxi-v2-20261130092352896376")  # the alias is literal


def test_rejects_are_counted_per_file_and_folder(tmp_path: Path) -> None:
    (tmp_path / "a.rejects.jsonl").write_text('{"line": 1}\n\n{"line": 2}\n')
    folder = tmp_path / "rejects"
    folder.mkdir()
    (folder / "reindex-x.jsonl").write_text('{"id": "x"}\n')
    (folder / "empty.jsonl").write_text("")
    (folder / "notes.txt").write_text("not a rejects file\n")
    found = count_rejects([tmp_path / "a.rejects.jsonl", folder, tmp_path / "missing.jsonl"])
    assert found == [
        {"path": str(tmp_path / "a.rejects.jsonl"), "lines": 2},
        {"path": str(folder / "reindex-x.jsonl"), "lines": 1},
    ]


ITEM = Item("i1", "ws", "Deploy runbook", body="steps", tags=("ops",))


def test_copying_keeps_stored_vectors_and_items() -> None:
    doc = item_to_doc(ITEM, [0.5] * 4)
    ((item, vector),) = Converter(None).convert([doc])
    assert item == ITEM and list(vector) == [0.5] * 4


def test_re_embedding_reuses_a_vector_only_for_the_same_text() -> None:
    embedder = FakeEmbedder(dimension=8)
    changed = Item("i2", "ws", "Other title")
    same_text = Item("i1", "ws", "Deploy runbook", body="steps", outcome="approved")
    # Keyed by storage key (workspace/id), as copying.fetch returns them.
    existing = {"ws/i1": item_to_doc(ITEM, [9.0] * 8), "ws/i2": item_to_doc(ITEM, [9.0] * 8)}
    docs = [item_to_doc(same_text, [0.0] * 384), item_to_doc(changed, [0.0] * 384)]
    pairs = Converter(embedder).convert(docs, existing)
    assert [p[0] for p in pairs] == [same_text, changed]
    assert list(pairs[0][1]) == [9.0] * 8  # only the outcome changed: the text is the same
    assert pytest.approx(list(pairs[1][1])) == list(embedder.embed_query("Other title"))


def test_unchanged_compares_items_and_kept_vectors() -> None:
    doc = item_to_doc(ITEM, [0.1, 0.2])
    assert Converter(None).unchanged(doc, item_to_doc(ITEM, [0.1, 0.2]))
    assert not Converter(None).unchanged(doc, item_to_doc(ITEM, [0.1, 0.3]))
    assert not Converter(None).unchanged(doc, None)
    moved = Item("i1", "ws", "Deploy runbook", body="steps", tags=("ops", "new"))
    assert not Converter(None).unchanged(doc, item_to_doc(moved, [0.1, 0.2]))
    # Re-embedding: the target's vectors are another model's, only the item counts.
    assert Converter(FakeEmbedder(dimension=8)).unchanged(doc, item_to_doc(ITEM, [7.0] * 8))


def test_first_difference_names_the_field() -> None:
    assert first_difference(ITEM, ITEM) is None
    assert first_difference(ITEM, Item("i1", "ws", "Deploy runbook", body="other")) == "body"


def test_same_vector_tolerates_float_noise_only() -> None:
    assert same_vector([0.1, 0.2], [0.1 + 1e-9, 0.2])
    assert not same_vector([0.1, 0.2], [0.1, 0.21])
    assert not same_vector([0.1], [0.1, 0.2])
    assert not same_vector(None, [0.1])


def test_copying_without_a_stored_vector_says_to_re_embed() -> None:
    doc = {k: v for k, v in item_to_doc(ITEM, [0.5]).items() if k != "vector"}
    with pytest.raises(IndexingError, match="i1 has no stored vector"):
        Converter(None).convert([doc])
