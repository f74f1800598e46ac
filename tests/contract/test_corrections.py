"""On the real node: a typo word's corrections read ahead (suli.backends.opensearch.corrections)
answer exactly as the fuzzy clause they stand for, and are never used past a write that could
have added a correction (DESIGN 2: derived data that can never be stale).

Every request is the engine's; the corrections are the engine's own rewrite of the clause.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import pytest

from suli.backends.base import LegQuery, LegResults
from suli.backends.opensearch import OpenSearchBackend, bodies, corrections
from suli.models import Filters
from suli.visibility import Visibility

from .helpers import WS, World, counting, item, opensearch_settings, opensearch_world

ITEMS = [
    item("itm_1", "Quokka runbook", "protein synthesis pathways for the wombat"),
    item("itm_2", "Proteins budget", "quokkas and wombats on the metabolic pathway"),
    item("itm_3", "Wombat welcome", "synthetic proteomics notes", path="docs/proteomics.md"),
    item("itm_4", "Pathway notes", "metabolic pathways for proteins", path="notes/pathway.md"),
    item("itm_5", "Protean plans", "a protein synthesiser and its metabolism"),
]
# One typo word, two, a word with many corrections, one with none near it, and a word right.
QUERIES = [
    "protien",
    "quokkas pathwya",
    "wombatt synthesis",
    "proteomic metabolik",
    "zzqqxxyy notes",
    "pathways",
]
VIS = Visibility(WS, "prn_a", frozenset())


@pytest.fixture
def world(opensearch_url: str, make_index_name: Callable[[], str]) -> Iterator[World]:
    w = opensearch_world(opensearch_settings(opensearch_url, make_index_name()))
    w.load(ITEMS)
    yield w
    w.backend.close()


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Items become searchable at once here (each load refreshes): no settling time."""
    monkeypatch.setattr(corrections, "SETTLE_MS", 0)


def backend(w: World) -> OpenSearchBackend:
    assert isinstance(w.backend, OpenSearchBackend)
    return w.backend


def legs(b: OpenSearchBackend, text: str, *, ahead: bool = True) -> LegResults:
    return b.reads.search(LegQuery(VIS, Filters(), text, None, 20), ahead=ahead)


def hits(r: LegResults) -> list[tuple[str, float]]:
    return [(h.id, h.score) for h in r.text]


@contextlib.contextmanager
def sent_known() -> Iterator[list[dict[str, Any]]]:
    """The corrections each text leg went with (bodies.text_leg's `known`)."""
    got: list[dict[str, Any]] = []
    real = bodies.text_leg

    def spy(q: Any, after: Any = None, known: Any = None) -> dict[str, Any]:
        got.append(dict(known or {}))
        return real(q, after, known)

    with mock.patch.object(bodies, "text_leg", spy):
        yield got


def read_ahead(b: OpenSearchBackend, texts: list[str]) -> None:
    for t in texts:
        legs(b, t)  # the fuzzy clauses; the words' corrections asked for
    assert b.reads.corrections.settle(60)


def test_known_corrections_answer_as_the_fuzzy_clauses_do(world: World, settled: None) -> None:
    b = backend(world)
    fuzzy = {q: hits(legs(b, q, ahead=False)) for q in QUERIES}
    assert fuzzy["protien"] and fuzzy["quokkas pathwya"]  # the typos do reach items
    read_ahead(b, QUERIES)
    for q in QUERIES:
        with sent_known() as known:
            got = hits(legs(b, q))
        assert got == fuzzy[q], q  # same hits, same order, same scores
        words = bodies.typo_words(q)
        assert len(known) == 1 and set(known[0]) == set(words), q
    # The terms are the engine's corrections, weighed by closeness (one edit of 7 letters).
    alias = world.settings.index_alias
    read = b.reads.corrections.known(alias, ["protien"])["protien"].terms or ()
    terms = {t: w for _, t, w in read}
    assert "protein" in terms and 0.8 < terms["protein"] < 0.9


def test_a_word_written_after_its_corrections_were_read_is_found_at_once(
    world: World, settled: None
) -> None:
    b = backend(world)
    q = "zebrra runbook"  # a typo no item is near yet, and a word itm_1 holds

    def ids() -> list[str]:
        return [i for i, _ in hits(legs(b, q))]

    read_ahead(b, [q])
    assert ids() == ["itm_1"]
    world.load([item("itm_z", "Zebra crossing")])  # a write after the read, then searchable
    with counting(b.client) as sent:
        assert sorted(ids()) == ["itm_1", "itm_z"]  # its word is reached by the typo at once
    # The write rode in the legs' request as the newest stamp, later than the corrections:
    # the legs were asked again with the fuzzy clause.
    assert sent == ["POST _msearch", "POST _msearch"]
    with counting(b.client) as sent:
        assert sorted(ids()) == ["itm_1", "itm_z"]
    assert sent == ["POST _msearch"]  # the dropped corrections are not used again
    read_ahead(b, [q])
    with sent_known() as known:
        assert sorted(ids()) == ["itm_1", "itm_z"]
    assert set(known[0]) == {"zebrra", "runbook"}  # read again, with the new word in them
    assert ("content.plain", "zebra", mock.ANY) in known[0]["zebrra"]


def test_a_delete_needs_no_check_to_stay_right(world: World, settled: None) -> None:
    """A term gone matches nothing: corrections naming it still answer right."""
    b = backend(world)
    read_ahead(b, ["protien"])
    b.delete(WS, ["itm_1"])
    b.refresh()
    with sent_known() as known:
        got = hits(legs(b, "protien"))
    assert known[0] and got == hits(legs(b, "protien", ahead=False))
    assert [i for i, _ in got] == ["itm_5"]


def test_nothing_is_read_ahead_while_an_index_is_written_to(world: World) -> None:
    """Within SETTLE_MS of the newest write, no correction is kept: the fuzzy clauses go."""
    b = backend(world)
    read_ahead(b, ["protien"])
    assert b.reads.corrections.known(world.settings.index_alias, ["protien"]) == {}
    with sent_known() as known:
        assert hits(legs(b, "protien"))
    assert known == [{}]


def test_items_are_stamped_when_written(world: World) -> None:
    b = backend(world)
    before = corrections.now_ms()
    world.load([item("itm_s", "Stamped")])
    src = b.client.search(
        index=world.settings.index_alias, body={"query": {"term": {"id": "itm_s"}}}
    )["hits"]["hits"]
    got = [h["_source"].get(corrections.STAMP_FIELD) for h in src]
    assert len(got) == 1 and isinstance(got[0], int) and got[0] >= before
