"""The embedded SQLite backend on its own: visibility and filters in SQL, FTS quoting, regex, writes."""

from __future__ import annotations

import os
import random
import sqlite3
import stat
import threading
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suli.backends.base import LegQuery, TextFields
from suli.backends.embedded import EmbeddedBackend
from suli.backends.embedded import sql as embedded_sql
from suli.backends.embedded.vectors import Matrix
from suli.errors import BackendUnavailable, DeadlineExceeded, InvalidInput, NotFound
from suli.models import KINDS, OUTCOMES, BoardAcl, Filters, Item, Principal, Station
from suli.visibility import Visibility, can_see, visibility_for

DIM = 8
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def axis(i: int) -> list[float]:
    v = [0.0] * DIM
    v[i] = 1.0
    return v


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EmbeddedBackend]:
    b = EmbeddedBackend(tmp_path / "suli.db", DIM)
    yield b
    b.close()


def everyone(vis_ws: str = "ws") -> Visibility:
    return Visibility(vis_ws, "prn_x", frozenset())


# ---- a random world: the SQL rule against suli.visibility.can_see -------------------------

WORKSPACES = ("ws_a", "ws_b")
BOARDS = ("brd_1", "brd_2", "brd_3", "brd_4", "brd_5")
PEOPLE = ("prn_1", "prn_2", "prn_3", "prn_4")
GROUPS = ("g_1", "g_2", "g_3")
TAGS = ("red", "green", "blue")
STATIONS = (Station("st_1", "Build"), Station("st_2", "Deploy"), Station("st_3", "Review"))
AGENTS = ("prn_bot1", "prn_bot2")


def random_world(seed: int) -> tuple[list[Item], list[Principal], list[BoardAcl]]:
    rng = random.Random(seed)
    principals = [
        Principal(p, rng.choice(WORKSPACES), groups=tuple(rng.sample(GROUPS, rng.randint(0, 2))))
        for p in PEOPLE
    ]
    acls = [
        BoardAcl(b, rng.choice(WORKSPACES), b, tuple(rng.sample(PEOPLE, rng.randint(0, 2))),
                 tuple(rng.sample(GROUPS, rng.randint(0, 1))))
        for b in BOARDS[:-1]  # the last board has no ACL: nobody sees it
    ]  # fmt: skip
    items = []
    for n in range(160):
        scope = rng.choice(("workspace", "board", "personal"))
        items.append(
            Item(
                id=f"itm_{n:03d}",
                workspace=rng.choice(WORKSPACES),
                title=f"report {rng.choice(('alpha', 'beta', 'gamma'))} {n}",
                body=f"common words {rng.choice(('delta', 'epsilon'))}",
                kind=rng.choice(KINDS),
                outcome=rng.choice((None, *OUTCOMES)),
                board=rng.choice(BOARDS) if scope == "board" else None,
                # Board items may name an uploader too: the board decides, never the uploader.
                uploader=rng.choice((*PEOPLE, "prn_stranger")) if scope != "workspace" else None,
                agent=rng.choice((None, *AGENTS)),
                stations=tuple(rng.sample(STATIONS, rng.randint(0, 2))),
                tags=tuple(rng.sample(TAGS, rng.randint(0, 2))),
                references=tuple(f"itm_{rng.randrange(160):03d}" for _ in range(rng.randint(0, 2))),
                last_activity_at=None if n % 17 == 0 else T0 - timedelta(hours=7 * n),
                hidden=rng.random() < 0.15,
            )
        )
    return items, principals, acls


World = tuple[EmbeddedBackend, list[Item], list[Principal]]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    items, principals, acls = random_world(seed=20260301)
    b = EmbeddedBackend(tmp_path_factory.mktemp("world") / "suli.db", DIM)
    rng = np.random.default_rng(1)
    out = b.upsert([(it, unit(rng)) for it in items])
    assert len(out.indexed) == len(items) and not out.rejected
    b.put_principals(principals)
    b.put_acls(acls)
    yield b, items, principals
    b.close()


def _vis(b: EmbeddedBackend, p: Principal) -> Visibility:
    return visibility_for(p, b.acls(p.workspace))


def test_every_read_path_sees_exactly_what_can_see_allows(world: World) -> None:
    b, items, principals = world
    for p in principals:
        vis = _vis(b, p)
        visible = {it.id for it in items if can_see(vis, it)}
        shown = {it.id for it in items if can_see(vis, it) and not it.hidden}
        assert shown, p.id  # a principal who sees nothing would prove little

        browsed, total = b.browse(vis, Filters(), 500)
        assert {it.id for it in browsed} == shown and total == len(shown)
        browsed, total = b.browse(vis, Filters(include_hidden=True), 500)
        assert {it.id for it in browsed} == visible and total == len(visible)

        legs = b.search(LegQuery(vis, Filters(), "report common", axis(0), depth=500))
        assert {h.id for h in legs.text} == shown
        assert {h.id for h in legs.vector} == shown

        all_ids = [it.id for it in items]
        assert set(b.get_many(vis, all_ids)) == visible  # a direct lookup names hidden items too
        assert set(b.vectors(vis, all_ids)) == visible
        assert b.facets(vis, Filters()).total == len(shown)
        for target in ("itm_001", "itm_050", "itm_100"):
            citing = {it.id for it in items if target in it.references}
            assert {it.id for it in b.referencing(vis, target, 500)} == citing & shown


def test_knn_depth_is_filled_with_visible_items_nearest_first(world: World) -> None:
    b, items, principals = world
    vecs = b.vectors(Visibility("ws_a", "nobody", frozenset(BOARDS)), [it.id for it in items])
    q = np.asarray(axis(3), dtype=np.float32)
    for p in principals:
        vis = _vis(b, p)
        shown = [it for it in items if can_see(vis, it) and not it.hidden]
        full = {it.id: float(np.dot(np.asarray(b.vectors(vis, [it.id])[it.id]), q)) for it in shown}
        want = sorted(full, key=lambda i: -full[i])[:5]
        hits = b.search(LegQuery(vis, Filters(), None, list(q), depth=5)).vector
        assert [h.id for h in hits] == want
        assert [h.score for h in hits] == pytest.approx([full[i] for i in want], abs=1e-6)
    assert vecs  # the lookup above saw some items of ws_a


def _matches(it: Item, f: Filters) -> bool:
    """The filters, written out in Python independently of the SQL."""
    day = it.last_activity_at.astimezone(UTC).date() if it.last_activity_at else None
    return (
        (not f.kinds or it.kind in f.kinds)
        and (not f.outcomes or it.outcome in f.outcomes)
        and (not f.boards or it.board in f.boards)
        and (not f.agents or it.agent in f.agents)
        and (not f.stations or any(s.id in f.stations or s.name in f.stations for s in it.stations))
        and (not f.tags or bool(set(it.tags) & set(f.tags)))
        and (f.since is None or (day is not None and day >= f.since))
        and (f.until is None or (day is not None and day <= f.until))
        and (f.include_hidden or not it.hidden)
        and it.id not in f.exclude_ids
    )


def _subset(values: tuple[str, ...]) -> st.SearchStrategy[tuple[str, ...]]:
    # Mostly empty: several filters at once often select nothing, which proves little.
    some = st.lists(st.sampled_from(values), min_size=1, max_size=2, unique=True).map(tuple)
    return st.one_of(st.just(()), st.just(()), some)


DAYS = st.none() | st.none() | st.dates(date(2026, 1, 10), date(2026, 3, 2))


FILTERS = st.builds(
    Filters,
    kinds=_subset(KINDS),
    outcomes=_subset(OUTCOMES),
    boards=_subset(BOARDS),
    agents=_subset(AGENTS),
    stations=_subset(("st_1", "Deploy", "Review", "st_9")),
    tags=_subset(TAGS),
    since=DAYS,
    until=DAYS,
    include_hidden=st.booleans(),
    exclude_ids=_subset(("itm_000", "itm_003", "itm_010", "itm_042")),
)


SINGLE_FILTERS = [
    *(Filters(kinds=(k,)) for k in KINDS),
    *(Filters(outcomes=(o,)) for o in OUTCOMES),
    Filters(outcomes=("approved", "failed")),
    *(Filters(boards=(b,)) for b in BOARDS),
    *(Filters(agents=(a,)) for a in AGENTS),
    *(Filters(stations=(s,)) for s in ("st_1", "st_2", "Review", "Build")),
    *(Filters(tags=(t,)) for t in TAGS),
    Filters(tags=("red", "blue")),
    *(Filters(since=d) for d in (date(2026, 2, 1), date(2026, 2, 28), date(2026, 3, 1))),
    *(Filters(until=d) for d in (date(2026, 1, 20), date(2026, 2, 28))),
    Filters(since=date(2026, 2, 10), until=date(2026, 2, 10)),  # one UTC day, both ends inclusive
    Filters(include_hidden=True),
    Filters(exclude_ids=("itm_001", "itm_002", "itm_003")),
]


@pytest.mark.parametrize("f", SINGLE_FILTERS)
def test_each_filter_alone_agrees_with_python(world: World, f: Filters) -> None:
    b, items, principals = world
    for p in principals:
        vis = _vis(b, p)
        want = {it.id for it in items if can_see(vis, it) and _matches(it, f)}
        browsed, total = b.browse(vis, f, 500)
        assert {it.id for it in browsed} == want and total == len(want), p.id
        legs = b.search(LegQuery(vis, f, "report", axis(1), depth=500))
        assert {h.id for h in legs.text} == want == {h.id for h in legs.vector}, p.id
    everything = {it.id for it in items}
    chosen = {it.id for it in items if _matches(it, f)}
    assert chosen and chosen != everything - {it.id for it in items if it.hidden}  # f selects


@settings(max_examples=60, deadline=None, database=None)
@given(f=FILTERS, who=st.sampled_from(range(len(PEOPLE))))
def test_filters_in_sql_agree_with_python(world: World, f: Filters, who: int) -> None:
    b, items, principals = world
    vis = _vis(b, principals[who])
    want = {it.id for it in items if can_see(vis, it) and _matches(it, f)}
    browsed, total = b.browse(vis, f, 500)
    assert {it.id for it in browsed} == want and total == len(want)
    legs = b.search(LegQuery(vis, f, "report", axis(1), depth=500))
    assert {h.id for h in legs.text} == want
    assert {h.id for h in legs.vector} == want
    assert b.facets(vis, f).total == len(want)


def test_facets_count_visible_items_per_value(world: World) -> None:
    b, items, principals = world
    for p in principals:
        vis = _vis(b, p)
        shown = [it for it in items if can_see(vis, it) and not it.hidden]
        want: dict[str, dict[str, int]] = {}
        for it in shown:
            for name, values in (("kind", [it.kind]), ("outcome", [it.outcome]), ("board", [it.board]),
                                 ("agent", [it.agent]), ("station", [s.name for s in it.stations]),
                                 ("tag", list(it.tags))):  # fmt: skip
                for v in set(values) - {None}:
                    want.setdefault(name, {}).setdefault(v, 0)
                    want[name][v] += 1
        got = b.facets(vis, Filters())
        assert list(got.values) == ["kind", "outcome", "board", "agent", "station", "tag"]
        assert {k: dict(v) for k, v in got.values.items() if v} == want
        for values in got.values.values():
            assert [n for _, n in values] == sorted((n for _, n in values), reverse=True)


def test_browse_is_newest_first_with_undated_items_last(world: World) -> None:
    b, _, principals = world
    got, _ = b.browse(_vis(b, principals[0]), Filters(), 500)
    dated = [it.last_activity_at for it in got if it.last_activity_at]
    assert dated == sorted(dated, reverse=True)
    assert [it.last_activity_at for it in got[len(dated) :]] == [None] * (len(got) - len(dated))


def test_visibility_sql_has_the_opensearch_shape() -> None:
    sql, params = embedded_sql.visibility_sql(Visibility("ws", "prn_me", frozenset({"b2", "b1"})))
    assert sql == (
        "(i.workspace = ? AND (i.scope = 'workspace' OR i.board IN (?, ?) "
        "OR (i.scope = 'personal' AND i.uploader = ?)))"
    )
    assert params == ["ws", "b1", "b2", "prn_me"]
    sql, params = embedded_sql.visibility_sql(Visibility("ws", "prn_me", frozenset()))
    assert "board" not in sql and params == ["ws", "prn_me"]


# ---- full text: user text is never FTS syntax -------------------------------------------------

HOSTILE = [
    '"foo" OR bar*', "NEAR(foo bar)", "NEAR(", "-x", "foo AND NOT bar", "title:foo", '"', '""',
    "'; DROP TABLE items; --", "^foo", "foo*", "(foo", "foo)", "{title}: foo", "+foo -bar",
    "foo NOT", "*", ":", "a OR", "\x00foo", "ümlaut café", "foo_bar", "x" * 300,
]  # fmt: skip


@pytest.mark.parametrize("text", HOSTILE)
def test_match_expression_is_quoted_words_only(text: str) -> None:
    flavours: tuple[TextFields, ...] = ("stemmed", "plain")
    for flavour in flavours:
        expr = embedded_sql.match_expression(text, flavour)
        if expr is None:
            continue
        for part in expr.split(" OR "):
            assert part.startswith('"') and part.endswith('"') and '"' not in part[1:-1]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_searches_as_plain_words(store: EmbeddedBackend, text: str) -> None:
    store.upsert([
        (Item("itm_foo", "ws", "foo report", body="bar and x notes"), axis(0)),
        (Item("itm_other", "ws", "title of nothing", body="NEAR NOT OR AND words"), axis(1)),
    ])  # fmt: skip
    flavours: tuple[TextFields, ...] = ("stemmed", "plain")
    for flavour in flavours:
        legs = store.search(LegQuery(everyone(), Filters(), text, None, 10, text_fields=flavour))
        assert all(h.id in ("itm_foo", "itm_other") for h in legs.text)


def test_operators_are_words_and_stopwords_drop_only_when_stemmed(store: EmbeddedBackend) -> None:
    store.upsert([
        (Item("itm_near", "ws", "near the river", body="a walk"), axis(0)),
        (Item("itm_the", "ws", "the plan", body="of the day"), axis(1)),
    ])  # fmt: skip
    legs = store.search(LegQuery(everyone(), Filters(), "NEAR(", None, 10))
    assert [h.id for h in legs.text] == ["itm_near"]
    assert store.search(LegQuery(everyone(), Filters(), "the", None, 10)).text == ()
    plain = store.search(LegQuery(everyone(), Filters(), "the", None, 10, text_fields="plain"))
    assert {h.id for h in plain.text} == {"itm_near", "itm_the"}


def test_stemmed_text_matches_word_forms_and_title_weighs_more(store: EmbeddedBackend) -> None:
    store.upsert([
        (Item("itm_body", "ws", "Notes", body="we were migrating all night long"), axis(0)),
        (Item("itm_title", "ws", "Migrations", body="we were there all night long"), axis(1)),
    ])  # fmt: skip
    legs = store.search(LegQuery(everyone(), Filters(), "migrate", None, 10))
    assert [h.id for h in legs.text] == ["itm_title", "itm_body"]
    assert legs.text[0].score > legs.text[1].score > 0
    assert "text_took" in legs.timings_ms


def test_binaries_are_found_by_title_path_and_caption_only(store: EmbeddedBackend) -> None:
    store.upsert([(Item("itm_png", "ws", "Logo", body="secretword", media_type="image/png",
                        path="assets/brand_logo.png", caption="the round mark"), axis(0))])  # fmt: skip
    for text, found in (("secretword", False), ("brand", True), ("round", True), ("logo", True)):
        assert bool(store.search(LegQuery(everyone(), Filters(), text, None, 10)).text) == found, (
            text
        )


# ---- regex ------------------------------------------------------------------------------------


@pytest.fixture
def rx_store(store: EmbeddedBackend) -> EmbeddedBackend:
    store.upsert([
        (Item("itm_1", "ws", "Deployment Runbook", body="steps\nfor the night shift"), axis(0)),
        (Item("itm_2", "ws", "Release notes", body="How to ROLLBACK a release"), axis(1)),
        (Item("itm_3", "ws", "Letters", body="a" * 5000 + "b"), axis(2)),
    ])  # fmt: skip
    return store


@pytest.mark.parametrize(
    "pattern,want",
    [
        ("ollbac", {"itm_2"}),
        ("DEPLOY", {"itm_1"}),
        ("^deploy", {"itm_1"}),
        ("^runbook", set()),  # ^ anchors the start of the field
        ("shift$", {"itm_1"}),
        ("steps.for", {"itm_1"}),  # . crosses lines, as in Lucene's regexp
        ("release$", {"itm_2"}),
        ("(a+)+$", set()),  # catastrophic for backtracking engines on "aaa…b"; linear in RE2
        ("(a+)+b$", {"itm_3"}),
        ("(a|aa)+b", {"itm_3"}),
    ],
)
def test_regex_over_title_and_body(rx_store: EmbeddedBackend, pattern: str, want: set[str]) -> None:
    items, total = rx_store.browse(everyone(), Filters(), 10, regex=pattern)
    assert {it.id for it in items} == want and total == len(want)
    legs = rx_store.search(
        LegQuery(everyone(), Filters(), "letters release deployment", axis(0), 10, regex=pattern)
    )
    assert {h.id for h in legs.text} == want
    assert {h.id for h in legs.vector} == want


@pytest.mark.parametrize(
    "pattern", ["(", "a)", "[z-a]", "(a)\\1", "(?=a)", "a{1001}", "x{1000}{1000}"]
)
def test_bad_or_huge_regex_is_invalid_input_naming_the_field(
    rx_store: EmbeddedBackend, pattern: str
) -> None:
    with pytest.raises(InvalidInput) as e:
        rx_store.browse(everyone(), Filters(), 10, regex=pattern)
    assert e.value.field == "regex"
    with pytest.raises(InvalidInput):
        rx_store.search(LegQuery(everyone(), Filters(), "x", axis(0), 10, regex=pattern))


# ---- writes -----------------------------------------------------------------------------------


def test_wrong_dimension_is_refused_and_nothing_is_written(store: EmbeddedBackend) -> None:
    good = (Item("itm_ok", "ws", "fine"), axis(0))
    with pytest.raises(InvalidInput) as e:
        store.upsert([good, (Item("itm_bad", "ws", "short"), [1.0, 0.0])])
    assert e.value.field == "vector" and "8" in e.value.message
    assert store.count() == 0


def test_non_finite_vectors_are_rejected_with_a_reason(store: EmbeddedBackend) -> None:
    nan = [float("nan")] * DIM
    out = store.upsert(
        [(Item("itm_ok", "ws", "fine"), axis(0)), (Item("itm_nan", "ws", "nan"), nan)]
    )
    assert out.indexed == ("itm_ok",)
    assert set(out.rejected) == {"itm_nan"} and "NaN" in out.rejected["itm_nan"]
    assert store.count() == 1


def test_upsert_replaces_text_vector_and_lists(store: EmbeddedBackend) -> None:
    store.upsert([(Item("itm_u", "ws", "old words", tags=("t1",), references=("itm_a",)), axis(0))])
    vis = everyone()
    assert store.facets(vis, Filters()).values["tag"] == [("t1", 1)]  # cached until the next write
    assert store.search(LegQuery(vis, Filters(), "old", axis(0), 5)).vector[
        0
    ].score == pytest.approx(1.0)
    store.upsert([(Item("itm_u", "ws", "new words", tags=("t2",), references=("itm_b",)), axis(1))])
    assert store.count() == 1
    assert store.search(LegQuery(vis, Filters(), "old", None, 5)).text == ()
    legs = store.search(LegQuery(vis, Filters(), "new", axis(1), 5))
    assert [h.id for h in legs.text] == ["itm_u"]
    assert legs.vector[0].score == pytest.approx(1.0)
    assert store.facets(vis, Filters()).values["tag"] == [("t2", 1)]
    assert store.referencing(vis, "itm_a", 5) == [] and len(store.referencing(vis, "itm_b", 5)) == 1


def test_delete_removes_every_trace_and_names_absent_ids(store: EmbeddedBackend) -> None:
    store.upsert([(Item("itm_d", "ws", "gone soon", tags=("t",), references=("x",)), axis(0)),
                  (Item("itm_k", "ws", "kept"), axis(1))])  # fmt: skip
    out = store.delete("ws", ["itm_d", "itm_never", "itm_d"])
    assert (out.indexed, out.missing) == (("itm_d",), ("itm_never",)) and not out.rejected
    vis = everyone()
    assert store.count() == 1
    assert store.search(LegQuery(vis, Filters(), "gone", None, 5)).text == ()
    assert [h.id for h in store.search(LegQuery(vis, Filters(), None, axis(0), 5)).vector] == [
        "itm_k"
    ]
    assert store.facets(vis, Filters()).values["tag"] == []
    assert store.referencing(vis, "x", 5) == []


def test_items_round_trip_every_field(store: EmbeddedBackend) -> None:
    it = Item(
        id="itm_full", workspace="ws", title="Full", kind="work-record", body="text", outcome="approved",
        board="brd_1", agent="prn_bot", stations=(Station("st_1", "Build"),), superseded_by="itm_new",
        references=("itm_a", "https://x.example"), tags=("a", "b"), media_type="text/markdown",
        path="docs/full.md", caption="cap", provenance={"source": "s", "n": [1, 2]},
        created_at=T0 - timedelta(days=2), updated_at=T0 - timedelta(days=1), last_activity_at=T0,
        url="https://app.example/itm_full", hidden=True,
    )  # fmt: skip
    store.upsert([(it, axis(0))])
    got = store.get_many(Visibility("ws", "p", frozenset({"brd_1"})), ["itm_full"])["itm_full"]
    assert got == it
    assert store.get_many(Visibility("ws", "p", frozenset()), ["itm_full"]) == {}


def test_a_second_handle_on_the_same_file_sees_writes(tmp_path: Path) -> None:
    """Another process's write moves the generation on, so the vector matrix is reloaded."""
    a, b = EmbeddedBackend(tmp_path / "s.db", DIM), EmbeddedBackend(tmp_path / "s.db", DIM)
    try:
        a.upsert([(Item("itm_1", "ws", "one"), axis(0))])
        assert [
            h.id for h in b.search(LegQuery(everyone(), Filters(), None, axis(0), 5)).vector
        ] == ["itm_1"]
        a.upsert([(Item("itm_2", "ws", "two"), axis(0)), (Item("itm_1", "ws", "one"), axis(1))])
        hits = b.search(LegQuery(everyone(), Filters(), None, axis(0), 5)).vector
        assert [h.id for h in hits] == ["itm_2", "itm_1"] and hits[1].score == pytest.approx(0.0)
        a.delete("ws", ["itm_2"])
        assert [
            h.id for h in b.search(LegQuery(everyone(), Filters(), None, axis(0), 5)).vector
        ] == ["itm_1"]
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("deletes_kept", [10_000, 1])
def test_an_incrementally_refreshed_matrix_equals_a_fresh_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deletes_kept: int
) -> None:
    """Handle b keeps its matrix and reads only the changes; a new handle reads everything."""
    monkeypatch.setattr(embedded_sql, "DELETES_KEPT", deletes_kept)  # 1: changes forgotten
    updates: list[int] = []
    real_updated = Matrix.updated

    def spy(self: Matrix, changed: list[tuple[int, bytes]], deleted: list[int]) -> Matrix:
        updates.append(len(changed) + len(deleted))
        return real_updated(self, changed, deleted)

    monkeypatch.setattr(Matrix, "updated", spy)
    rng = np.random.default_rng(9)
    a, b = EmbeddedBackend(tmp_path / "s.db", DIM), EmbeddedBackend(tmp_path / "s.db", DIM)
    ids = [f"itm_{n}" for n in range(30)]

    def nearest(backend: EmbeddedBackend, qv: list[float]) -> list[tuple[str, float]]:
        hits = backend.search(LegQuery(everyone(), Filters(), None, qv, 100)).vector
        return [(h.id, round(h.score, 5)) for h in hits]

    try:
        a.upsert([(Item(i, "ws", i), unit(rng)) for i in ids[:10]])
        for step in range(25):
            qv = list(unit(rng))
            fresh = EmbeddedBackend(tmp_path / "s.db", DIM)
            assert nearest(b, qv) == nearest(fresh, qv)
            fresh.close()
            op = step % 4
            if op == 0:  # new items
                a.upsert([(Item(i, "ws", i), unit(rng)) for i in rng.choice(ids, 3, replace=False)])
            elif op == 1:  # replaced vectors
                a.upsert(
                    [(Item(i, "ws", i), unit(rng)) for i in rng.choice(ids[:10], 2, replace=False)]
                )
            elif op == 2:  # deletions, the newest row too (its rowid may be used again)
                newest = a.browse(everyone(), Filters(), 1)[0]
                a.delete("ws", [*(it.id for it in newest), str(rng.choice(ids))])
            else:  # delete and re-add in one go between two searches of b
                gone = str(rng.choice(ids))
                a.delete("ws", [gone])
                a.upsert([(Item(gone, "ws", gone), unit(rng))])
        assert len(updates) >= (20 if deletes_kept > 1 else 1)  # the incremental path ran
    finally:
        a.close()
        b.close()


def test_an_older_store_format_is_refused(tmp_path: Path) -> None:
    EmbeddedBackend(tmp_path / "s.db", DIM).close()
    conn = sqlite3.connect(tmp_path / "s.db")
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema'")
    conn.commit()
    conn.close()
    with pytest.raises(BackendUnavailable, match="format 1"):
        EmbeddedBackend(tmp_path / "s.db", DIM)


def test_reopening_with_another_dimension_is_refused(tmp_path: Path) -> None:
    EmbeddedBackend(tmp_path / "s.db", DIM).close()
    with pytest.raises(BackendUnavailable, match="8-dimension"):
        EmbeddedBackend(tmp_path / "s.db", 16)


def test_a_file_that_is_not_a_database_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "junk.db").write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(BackendUnavailable):
        EmbeddedBackend(tmp_path / "junk.db", DIM)


def test_a_bad_query_vector_fails_only_its_leg(store: EmbeddedBackend) -> None:
    store.upsert([(Item("itm_1", "ws", "one"), axis(0))])
    legs = store.search(LegQuery(everyone(), Filters(), "one", [1.0, 2.0], 5))
    assert [h.id for h in legs.text] == ["itm_1"]
    assert "vector" in legs.errors and legs.vector == ()


def test_deadline_stops_the_query(store: EmbeddedBackend) -> None:
    rng = np.random.default_rng(3)
    store.upsert(
        [
            (Item(f"itm_{n}", "ws", f"word{n} shared", body="shared " * 50), unit(rng))
            for n in range(300)
        ]
    )
    with pytest.raises(DeadlineExceeded):
        store.browse(everyone(), Filters(), 10, timeout_s=1e-9, regex="zzz")
    assert (
        store.browse(everyone(), Filters(), 10, timeout_s=30)[1] == 300
    )  # the connection still works


def test_searches_and_writes_from_many_threads(store: EmbeddedBackend) -> None:
    rng = np.random.default_rng(5)
    store.upsert([(Item(f"itm_{n}", "ws", f"shared {n}"), unit(rng)) for n in range(50)])
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            for _ in range(20):
                legs = store.search(LegQuery(everyone(), Filters(), "shared", axis(0), 10))
                assert len(legs.text) == 10 and len(legs.vector) == 10
        except BaseException as e:  # collected: an assert in a thread would be lost
            errors.append(e)

    def writer() -> None:
        try:
            for n in range(20):
                store.upsert([(Item(f"itm_w{n}", "ws", "shared new"), axis(n % DIM))])
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(3)] + [
        threading.Thread(target=writer)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store.count() == 70


def test_facets_follow_acl_changes_at_once(store: EmbeddedBackend) -> None:
    store.upsert([(Item("itm_b", "ws", "on a board", board="brd_1", tags=("secret",)), axis(0))])
    me = Principal("prn_me", "ws")
    store.put_acls([BoardAcl("brd_1", "ws", members=("prn_other",))])
    assert store.facets(visibility_for(me, store.acls("ws")), Filters()).total == 0
    store.put_acls([BoardAcl("brd_1", "ws", members=("prn_me",))])
    got = store.facets(visibility_for(me, store.acls("ws")), Filters())
    assert got.total == 1 and got.values["tag"] == [("secret", 1)]


@pytest.mark.parametrize("n_cand", [1, 5, 40, 200])
def test_matrix_top_is_the_exact_nearest_among_candidates(n_cand: int) -> None:
    rng = np.random.default_rng(n_cand)
    vecs = rng.standard_normal((200, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    m = Matrix(np.arange(10, 410, 2, dtype=np.int64), vecs)  # rowids with gaps
    cand = np.sort(rng.choice(m.rowids, size=n_cand, replace=False))
    query = unit(rng)
    rowids, scores = m.top(cand, m.positions(cand), query, 7)
    brute = sorted(
        ((float(vecs[(r - 10) // 2] @ query), int(r)) for r in cand), key=lambda t: (-t[0], t[1])
    )
    assert list(rowids) == [r for _, r in brute[:7]]
    assert list(scores) == pytest.approx([s for s, _ in brute[:7]], abs=1e-5)


@settings(max_examples=300, deadline=None, database=None)
@given(
    axes=st.lists(st.integers(0, 3), min_size=1, max_size=60),
    picked=st.data(),
    k=st.integers(1, 12),
)
def test_matrix_top_breaks_ties_at_the_kth_place_by_rowid(
    axes: list[int], picked: st.DataObject, k: int
) -> None:
    """Many items share a vector (duplicates are common: templates, re-uploads): the k
    nearest are the same set whatever order the partition left them in, ties by rowid."""
    vecs = np.stack([axis(a) for a in axes]).astype(np.float32)
    m = Matrix(np.arange(5, 5 + 3 * len(axes), 3, dtype=np.int64), vecs)
    chosen = picked.draw(st.sets(st.sampled_from(range(len(axes))), min_size=1))
    cand = m.rowids[sorted(chosen)]
    query = np.asarray(axis(0), dtype=np.float32)
    rowids, _ = m.top(cand, m.positions(cand), query, k)
    brute = sorted((-float(vecs[(r - 5) // 3] @ query), int(r)) for r in cand)
    assert list(rowids) == [r for _, r in brute[:k]]


def test_matrix_update_overwrites_appends_grows_and_refuses_disorder() -> None:
    def rows(*pairs: tuple[int, int]) -> list[tuple[int, bytes]]:
        return [(r, np.asarray(axis(a), dtype=np.float32).tobytes()) for r, a in pairs]

    m = Matrix.from_rows(rows((3, 0), (1, 1), (2, 2)), DIM)  # sorted on load
    assert list(m.rowids) == [1, 2, 3]
    old_view = m.vectors
    m2 = m.updated(rows((2, 5), *((10 + i, i % DIM) for i in range(200))), deleted=[3])
    assert m2 is not None and list(m2.rowids[:4]) == [1, 2, 3, 10] and len(m2.rowids) == 203
    assert m2.vectors[1].tolist() == axis(5) and m2.dead == 1
    assert len(old_view) == 3  # the older matrix keeps its rows
    assert m2.updated(rows((5, 0)), deleted=[]) is None  # below the last row: full load


# ---- ACLs, principals, tokens, ops ------------------------------------------------------------


def test_acls_principals_and_tokens_upsert(store: EmbeddedBackend) -> None:
    store.put_acls([BoardAcl("brd_1", "ws", "One", ("prn_a",), ("g",)), BoardAcl("brd_2", "other")])
    store.put_acls([BoardAcl("brd_1", "ws", "One again", ("prn_b",))])
    assert store.acls("ws") == [BoardAcl("brd_1", "ws", "One again", ("prn_b",), ())]
    store.put_principals([Principal("prn_a", "ws", "agent", ("g1", "g2"))])
    assert store.principal("prn_a") == Principal("prn_a", "ws", "agent", ("g1", "g2"))
    assert store.principal("prn_none") is None
    store.put_token("h" * 64, "prn_a", False)
    store.put_token("h" * 64, "prn_a", True)
    assert store.token("h" * 64) == ("prn_a", True)
    assert store.revoke_token("h" * 64) == 1
    assert store.token("h" * 64) is None
    with pytest.raises(NotFound):
        store.revoke_token("h" * 64)


def test_ping_count_refresh_and_close(store: EmbeddedBackend, tmp_path: Path) -> None:
    store.upsert([(Item("itm_1", "ws", "one"), axis(0))])
    store.refresh()
    assert store.ping() == {"backend": "embedded", "path": str(tmp_path / "suli.db"), "items": 1}
    store.close()
    with pytest.raises(BackendUnavailable):
        store.count()
    conn = sqlite3.connect(tmp_path / "suli.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_a_new_store_and_its_wal_files_are_private_to_the_owner(tmp_path: Path) -> None:
    old = os.umask(0o022)  # the usual default, which made the file 0644
    try:
        b = EmbeddedBackend(tmp_path / "new" / "suli.db", DIM)
        b.upsert([(Item("itm_1", "ws", "one"), axis(0))])
        b.search(LegQuery(everyone(), Filters(), "one", None, 5))
        files = sorted(p.name for p in (tmp_path / "new").iterdir())
        assert files == ["suli.db", "suli.db-shm", "suli.db-wal"]
        for name in files:
            mode = stat.S_IMODE((tmp_path / "new" / name).stat().st_mode)
            assert mode == 0o600, f"{name} is {oct(mode)}"
        b.close()
    finally:
        os.umask(old)
