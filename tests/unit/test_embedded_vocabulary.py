"""The embedded store's per-generation Vocabulary: the same corrections as reading the
vocabulary afresh, per caller, and a write (a new generation) reads it again."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suli.backends.base import LegQuery
from suli.backends.embedded import EmbeddedBackend, typos
from suli.backends.embedded import sql as q
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
    c = store.db.conn()
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


# ---- the words table (embedded_sql.TERMS_TABLE) ------------------------------------------

TEXTS = ("deploy kubernetes", "Déploy notes", "orchestration release", "relase deplyo",
         "kubectl zebrafish", "display delay", "", "ÜBER über uber")  # fmt: skip


def _terms(c: sqlite3.Connection) -> list[tuple[str, int]]:
    return c.execute(f"SELECT term, docs FROM {q.TERMS_TABLE} ORDER BY term").fetchall()


def _vocab(c: sqlite3.Connection) -> list[tuple[str, int]]:
    return c.execute(f"SELECT term, doc FROM temp.{typos.VOCAB_TABLE} ORDER BY term").fetchall()


def _meta(c: sqlite3.Connection, key: str) -> str | None:
    row = c.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


write = st.tuples(
    st.sampled_from(["upsert", "delete"]),
    st.lists(st.tuples(st.integers(0, 5), st.sampled_from(TEXTS), st.sampled_from(TEXTS)),
             min_size=1, max_size=4),
)  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(writes=st.lists(write, min_size=1, max_size=8))
def test_the_words_table_is_the_vocabulary_after_every_write(
    tmp_path_factory: pytest.TempPathFactory, writes: list[tuple[str, list[tuple[int, str, str]]]]
) -> None:
    b = EmbeddedBackend(tmp_path_factory.mktemp("terms") / "s.db", 4)
    try:
        c = b.db.conn()
        for op, rows in writes:
            if op == "upsert":  # the same id twice in a batch: the later text wins
                b.upsert([(Item(f"itm_{n}", "ws", title, body=body), [1.0, 0, 0, 0])
                          for n, title, body in rows])  # fmt: skip
            else:
                b.delete("ws", [f"itm_{n}" for n, _, _ in rows])
            _current(c)
    finally:
        b.close()


def _current(c: sqlite3.Connection) -> list[tuple[str, int]]:
    """Assert the words table is the vocabulary's and current for the store's generation."""
    terms = _terms(c)
    assert terms == _vocab(c)
    assert _meta(c, "terms_generation") == _meta(c, "generation")
    return terms


def test_a_store_without_the_words_table_fills_it_on_open(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    b = EmbeddedBackend(path, 4)
    b.upsert([(Item(f"itm_{i}", "ws", t, body=t), [1.0, 0, 0, 0]) for i, t in enumerate(TEXTS)])
    b.close()
    raw = sqlite3.connect(path, isolation_level=None)  # as a Suli before the table left it
    raw.execute(f"DROP TABLE {q.TERMS_TABLE}")
    raw.execute("DELETE FROM meta WHERE key = 'terms_generation'")
    raw.close()
    b = EmbeddedBackend(path, 4)
    try:
        c = b.db.conn()
        assert _current(c) != []
    finally:
        b.close()


def test_a_write_without_the_words_table_is_read_through_the_vocabulary(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    b = EmbeddedBackend(path, 4)
    b.upsert([(Item("itm_a", "ws", "zebrafish"), [1.0, 0, 0, 0])])
    vis = Visibility("ws", "prn_a", frozenset())

    def first_hits(text: str) -> list[str]:
        return [h.id for h in b.search(LegQuery(vis, Filters(), text, None, 10)).text]

    try:
        assert first_hits("zebrafsh") == ["itm_a"]
        # Another process's Suli that does not keep the table writes (triggers of its own).
        raw = sqlite3.connect(path, isolation_level=None)
        raw.execute("BEGIN IMMEDIATE")
        q.next_generation(raw)  # moves the table on only because it was current: set it back
        raw.execute("UPDATE meta SET value = '0' WHERE key = 'terms_generation'")
        raw.execute("UPDATE items SET title = 'quokka' WHERE id = 'itm_a'")
        raw.execute("COMMIT")
        raw.close()
        assert _terms(b.db.conn()) == [("zebrafish", 1)]  # behind: not read
        assert first_hits("quokk") == ["itm_a"] and first_hits("zebrafsh") == []
        b.upsert([(Item("itm_b", "ws", "wombat"), [1.0, 0, 0, 0])])  # stays behind
        assert _meta(b.db.conn(), "terms_generation") == "0"
        assert first_hits("wombt") == ["itm_b"]
    finally:
        b.close()
    b = EmbeddedBackend(path, 4)  # the next open rebuilds it
    try:
        c = b.db.conn()
        assert _terms(c) == _vocab(c) == [("quokka", 1), ("wombat", 1)]
        assert _meta(c, "terms_generation") == _meta(c, "generation")
    finally:
        b.close()


@settings(max_examples=40, deadline=None)
@given(word=st.sampled_from([*WORDS, "deplo", "kubernetez", "relaese", "orchestrat", "zzzzz"]))
def test_corrections_from_the_words_table_equal_a_fresh_read_per_caller(
    store: EmbeddedBackend, word: str
) -> None:
    c = store.db.conn()
    gen = int(_meta(c, "generation") or 0)
    assert _meta(c, "terms_generation") == str(gen)
    vocab = typos.Vocabulary(gen)
    for who in ("prn_in", "prn_out", "prn_in"):
        vis = visibility_for(Principal(who, "ws"), store.acls("ws"))
        assert vocab.corrections(c, vis, word) == typos.corrections(c, vis, word)
    assert vocab._table(c) == q.TERMS_TABLE
