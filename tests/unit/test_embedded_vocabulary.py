"""The embedded store's per-generation Vocabulary: the same corrections as reading the
vocabulary afresh, per caller, and a write (a new generation) reads it again."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suli.backends import embedded_typos as typos
from suli.backends.base import LegQuery
from suli.backends.embedded import EmbeddedBackend
from suli.models import BoardAcl, Filters, Item, Principal
from suli.visibility import Visibility, visibility_for

WORDS = ("deploy", "deplyo", "deploys", "depot", "delay", "display", "kubernetes", "kubernets",
         "kubectl", "orchestration", "orchestrations", "orchestra", "release", "relase")  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> EmbeddedBackend:
    b = EmbeddedBackend(tmp_path_factory.mktemp("vocab") / "s.db", 4)
    items = [
        Item(f"itm_{i}", "ws", f"{w} notes", body=f"{w} {WORDS[(i * 5) % len(WORDS)]}",
             board="brd_hidden" if i % 3 == 0 else None)
        for i, w in enumerate(WORDS)
    ]  # fmt: skip
    b.upsert([(it, [1.0, 0.0, 0.0, 0.0]) for it in items])
    b.put_acls([BoardAcl("brd_hidden", "ws", members=("prn_in",))])
    return b


@settings(max_examples=60, deadline=None)
@given(word=st.sampled_from([*WORDS, "deplo", "kubernetez", "relaese", "orchestrat", "zzzzz"]))
def test_vocabulary_corrections_equal_a_fresh_read_per_caller(
    store: EmbeddedBackend, word: str
) -> None:
    c = store._conn()
    vocab = typos.Vocabulary()
    for who in ("prn_in", "prn_out", "prn_in"):
        vis = visibility_for(Principal(who, "ws"), store.acls("ws"))
        assert vocab.corrections(c, vis, word) == typos.corrections(c, vis, word)


def test_a_write_makes_a_new_vocabulary(store: EmbeddedBackend) -> None:
    vis = Visibility("ws", "prn_out", frozenset())

    def first_hits(text: str) -> list[str]:
        return [h.id for h in store.search(LegQuery(vis, Filters(), text, None, 10)).text]

    assert first_hits("zebrafish") == []
    assert first_hits("zebrafsh") == []  # no correction yet
    store.upsert([(Item("itm_z", "ws", "zebrafish"), [0.0, 1.0, 0.0, 0.0])])
    assert first_hits("zebrafsh") == ["itm_z"]  # the new word is read in the new generation
    store.delete("ws", ["itm_z"])
    assert first_hits("zebrafsh") == []
