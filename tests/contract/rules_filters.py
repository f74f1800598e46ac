"""Contract rules of DESIGN.md section 3.6-3.8: filters, limits, browse, regex, result fields."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from suli.errors import InvalidInput
from suli.models import Item

from .helpers import T0, KeyedEmbedder, MakeSearcher, World, acl, axis, blend, item, principal

NOW = datetime.now(UTC)


def _at(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


FILTER_ITEMS = [
    item(
        "itm_f1",
        "Build report one",
        kind="artifact",
        outcome="approved",
        board="brd_a",
        agent="prn_bot1",
        stations=[{"id": "st_1", "name": "Build"}],
        tags=["alpha"],
        last_activity_at=_at("2026-01-05T00:00:00Z"),
    ),
    item(
        "itm_f2",
        "Build report two",
        kind="work-record",
        outcome="rejected",
        board="brd_b",
        agent="prn_bot2",
        stations=[{"id": "st_2", "name": "Deploy"}],
        tags=["beta"],
        last_activity_at=_at("2026-01-04T23:59:59Z"),
    ),
    item(
        "itm_f3",
        "Build report three",
        kind="artifact",
        outcome="failed",
        agent="prn_bot1",
        stations=[{"id": "st_2", "name": "Deploy"}],
        tags=["alpha", "beta"],
        last_activity_at=_at("2026-01-10T23:59:59.999Z"),
    ),
    item(
        "itm_f4",
        "Build report four",
        kind="work-record",
        outcome="completed",
        board="brd_a",
        last_activity_at=_at("2026-01-11T00:00:00Z"),
    ),
    item(
        "itm_f5",
        "Build report five",
        outcome="in-progress",
        hidden=True,
        tags=["alpha"],
        last_activity_at=_at("2026-01-07T08:00:00Z"),
    ),
    item(
        "itm_f6",
        "Build report six",
        outcome="abandoned",
        uploader="prn_p",
        last_activity_at=_at("2026-01-08T08:00:00Z"),
    ),
    item(
        "itm_f7",
        "Build report seven",
        kind="work-record",
        outcome="superseded",
        board="brd_b",
        agent="prn_bot2",
        stations=[{"id": "st_3", "name": "Review"}],
        last_activity_at=_at("2026-01-06T08:00:00Z"),
    ),
    item("itm_f8", "Build report eight", last_activity_at=None),
    item("itm_r1", "Build report recent", last_activity_at=NOW - timedelta(days=1)),
    item("itm_r2", "Build report older", last_activity_at=NOW - timedelta(days=10)),
    *(
        item(f"itm_g{n}", f"Build report filler {n}", last_activity_at=T0 - timedelta(hours=n))
        for n in (1, 2, 3)
    ),
]
TODAY = NOW.date()


def _day(it: Item) -> Any:
    return it.last_activity_at.date() if it.last_activity_at else None


def _since(d: Any) -> Callable[[Item], bool]:
    return lambda it: it.last_activity_at is not None and _day(it) >= d


def _until(d: Any) -> Callable[[Item], bool]:
    return lambda it: it.last_activity_at is not None and _day(it) <= d


D = datetime.fromisoformat
FILTER_CASES: list[tuple[str, dict[str, Any], Callable[[Item], bool]]] = [
    ("kind", {"kind": "work-record"}, lambda it: it.kind == "work-record"),
    (
        "outcomes",
        {"outcome": ["rejected", "failed"]},
        lambda it: it.outcome in ("rejected", "failed"),
    ),
    (
        "outcomes-csv",
        {"outcome": "approved,completed"},
        lambda it: it.outcome in ("approved", "completed"),
    ),
    ("board", {"board": "brd_a"}, lambda it: it.board == "brd_a"),
    ("agent", {"agent": "prn_bot1"}, lambda it: it.agent == "prn_bot1"),
    ("station-id", {"station": "st_2"}, lambda it: any(s.id == "st_2" for s in it.stations)),
    (
        "station-name",
        {"station": "Deploy"},
        lambda it: any(s.name == "Deploy" for s in it.stations),
    ),
    ("tag", {"tag": "beta"}, lambda it: "beta" in it.tags),
    ("since", {"since": "2026-01-05"}, _since(D("2026-01-05").date())),
    ("until", {"until": "2026-01-10"}, _until(D("2026-01-10").date())),
    (
        "since-until",
        {"since": "2026-01-05", "until": "2026-01-10"},
        lambda it: _since(D("2026-01-05").date())(it) and _until(D("2026-01-10").date())(it),
    ),
    ("one-day", {"since": "2026-01-10", "until": "2026-01-10"}, lambda it: it.id == "itm_f3"),
    ("recent", {"recent_days": 3}, _since(TODAY - timedelta(days=2))),
    (
        "combined",
        {"kind": "artifact", "tag": "alpha"},
        lambda it: it.kind == "artifact" and "alpha" in it.tags,
    ),
    ("hidden", {"include_hidden": True}, lambda it: True),
]


class FilterRules:
    """DESIGN 3.6-3.7: every filter in both legs and in browse; limits; newest first."""

    @pytest.fixture(scope="class")
    @classmethod
    def filtered(cls, make_searcher: MakeSearcher) -> World:
        acls = [acl("brd_a", members=["prn_p"]), acl("brd_b", groups=["g_b"])]
        return make_searcher(FILTER_ITEMS, [principal("prn_p", "g_b")], acls)

    @pytest.mark.parametrize("name,params,pred", FILTER_CASES, ids=[c[0] for c in FILTER_CASES])
    def test_filter_applies_to_search_browse_and_facets(
        self, filtered: World, name: str, params: dict[str, Any], pred: Callable[[Item], bool]
    ) -> None:
        hidden_ok = params.get("include_hidden", False)
        want = {it.id for it in FILTER_ITEMS if pred(it) and (hidden_ok or not it.hidden)}
        assert want, name  # a case that selects nothing would prove nothing
        browse = filtered.search("prn_p", "", limit=25, **params)
        assert {r.id for r in browse.results} == want
        assert browse.total == len(want)
        # "build report" is in every title, so the text leg alone would find all of them.
        found = filtered.search("prn_p", "build report", limit=25, **params)
        assert {r.id for r in found.results} == want
        assert found.total == len(want)
        vec = filtered.with_settings(meaning_margin=2.0).search(
            "prn_p", "build report", mode="vector", limit=25, **params
        )
        assert {r.id for r in vec.results} == want
        from suli.search_params import search_request

        facets = filtered.facets("prn_p", search_request("", **params).filters)
        assert facets.total == len(want)

    def test_hidden_items_are_excluded_by_default(self, filtered: World) -> None:
        assert "itm_f5" not in filtered.ids("prn_p", "build report five", limit=25)
        assert "itm_f5" in filtered.ids("prn_p", "build report five", limit=25, include_hidden=True)

    def test_limit_defaults_to_10_and_bounds_results(self, filtered: World) -> None:
        visible = len([it for it in FILTER_ITEMS if not it.hidden])
        assert visible > 10
        for query in ("", "build report"):
            resp = filtered.search("prn_p", query)
            assert len(resp.results) == 10 and resp.total == visible, query
            assert len(filtered.ids("prn_p", query, limit=1)) == 1
            assert len(filtered.ids("prn_p", query, limit=25)) == visible

    def test_browse_lists_newest_activity_first(self, filtered: World) -> None:
        got = filtered.search("prn_p", "", limit=25).results
        dated = [r.last_activity_at for r in got if r.last_activity_at is not None]
        assert dated == sorted(dated, reverse=True)
        assert got[0].id == "itm_r1"
        assert got[-1].id == "itm_f8"  # no activity date: last

    def test_browse_takes_the_newest_first_when_limited(self, filtered: World) -> None:
        assert filtered.ids("prn_p", "", limit=2) == ["itm_r1", "itm_r2"]


RX_ITEMS = [
    item("itm_rx1", "Deployment Runbook", "steps for the night shift"),
    item("itm_rx2", "Release notes", "How to ROLLBACK a release with the runbook"),
    item("itm_rx3", "Unrelated", "nothing of interest here"),
    item("itm_rx4", "Letters", "a" * 40 + "b"),
]


class RegexRules:
    """DESIGN 3.7: regex mode over title and body, inside words, case-insensitive, bounded."""

    @pytest.fixture(scope="class")
    @classmethod
    def rx(cls, make_searcher: MakeSearcher) -> World:
        return make_searcher(RX_ITEMS, [principal("prn_p")])

    @pytest.mark.parametrize(
        "pattern,want",
        [
            ("ollbac", {"itm_rx2"}),  # inside a word, other case, in the body
            ("DEPLOYMENT", {"itm_rx1"}),  # title, other case
            ("run.ook", {"itm_rx1", "itm_rx2"}),
            ("ploym|ollba", {"itm_rx1", "itm_rx2"}),
            ("interest here", {"itm_rx3"}),
            ("zzz", set()),
        ],
    )
    def test_regex_matches_title_and_body(self, rx: World, pattern: str, want: set[str]) -> None:
        assert set(rx.ids("prn_p", "", regex=pattern)) == want
        assert rx.search("prn_p", "", regex=pattern).total == len(want)

    def test_regex_filters_a_word_search(self, rx: World) -> None:
        assert rx.ids("prn_p", "runbook", regex="ollbac") == ["itm_rx2"]

    @pytest.mark.timeout(60)
    # "a{2" is a literal to Python's re and an error to Lucene's: either answer is fine, a 500 is not.
    @pytest.mark.parametrize("pattern", ["(a+)+$", "(a|aa)+b", "(.*a){12}", "a{2"])
    def test_pathological_pattern_answers_or_is_refused(self, rx: World, pattern: str) -> None:
        for query in ("", "letters"):
            try:
                ids = rx.ids("prn_p", query, regex=pattern)
            except InvalidInput as e:
                assert e.field == "regex"
            else:
                assert set(ids) <= {"itm_rx4", "itm_rx1", "itm_rx2", "itm_rx3"}

    @pytest.mark.parametrize("pattern", ["(", "[a-", "x" * 201, "(?=a)b", "(a)\\1"])
    def test_bad_pattern_names_the_field(self, rx: World, pattern: str) -> None:
        with pytest.raises(InvalidInput) as e:
            rx.search("prn_p", "", regex=pattern)
        assert e.value.field == "regex"


class ResultShapeRules:
    """DESIGN 3.8: what every result carries; snippets for word and meaning-only matches."""

    @pytest.fixture(scope="class")
    @classmethod
    def shaped(cls, make_searcher: MakeSearcher) -> World:
        filler = " ".join(f"lunch{n}" for n in range(45))
        items = [
            item(
                "itm_s1",
                "Zebra migration guide",
                "How the zebra herd migrates north. Nothing else.",
                outcome="approved",
                provenance={"source": "podstore", "created_by": "prn_agent7"},
                url="https://app.example/a/itm_s1",
            ),
            item(
                "itm_s2",
                "Seating plan",
                f"{filler}. The orchestra sits left of the stage tonight.",
                kind="work-record",
                outcome="completed",
                board="brd_a",
            ),
            item(
                "itm_s3",
                "Zebra crossing <b>bold</b>",
                "<script>alert(1)</script> zebra here",
                uploader="prn_p",
                superseded_by="itm_s1",
                outcome="superseded",
            ),
        ]
        # "orchestrations" shares no stem with itm_s2 ("orchestr" vs "orchestra") and is no typo
        # of a word of it (five edits): a meaning-only match.
        emb = KeyedEmbedder(
            [
                ("zebra", axis(0)),
                (items[0], axis(0)),
                (items[2], axis(0)),
                ("orchestrations", axis(5)),
                (items[1], blend(5, 6, 0.98)),
            ]
        )
        return make_searcher(
            items, [principal("prn_p")], [acl("brd_a", members=["prn_p"])], embedder=emb
        )

    def test_results_carry_every_field(self, shaped: World) -> None:
        resp = shaped.search("prn_p", "zebra", explain=True, limit=25)
        r = next(r for r in resp.results if r.id == "itm_s1")
        assert (r.kind, r.title, r.outcome, r.scope) == (
            "artifact",
            "Zebra migration guide",
            "approved",
            "workspace",
        )
        assert r.provenance == {"source": "podstore", "created_by": "prn_agent7"}
        assert r.url == "https://app.example/a/itm_s1"
        assert r.superseded_by is None and r.superseded is False
        assert "<mark>zebra</mark>" in r.snippet.lower()
        assert r.explain is not None and r.explain.kept == "word-match"
        scopes = {r.id: r.scope for r in shaped.search("prn_p", "", limit=25).results}
        assert scopes == {"itm_s1": "workspace", "itm_s2": "board", "itm_s3": "personal"}
        s3 = next(r for r in resp.results if r.id == "itm_s3")
        assert s3.superseded_by == "itm_s1" and s3.superseded is True

    @pytest.fixture(scope="class")
    @classmethod
    def worded(cls, make_searcher: MakeSearcher) -> World:
        """Items whose text holds the values a search's filters and visibility name."""
        said = "zebra notes on the workspace, personal board, true approved artifact work"
        items = [
            item("itm_w1", "Zebra board", said, outcome="approved", tags=["work"], board="brd_a"),
            item("itm_w2", "Zebra mine", said, uploader="prn_p", tags=["work"]),
            item("itm_w3", "Zebra hidden", said, hidden=True, tags=["work"]),
        ]
        return make_searcher(items, [principal("prn_p")], [acl("brd_a", members=["prn_p"])])

    @pytest.mark.parametrize(
        "filters",
        [
            {},
            {"kind": "artifact", "outcome": "approved", "tag": "work", "board": "brd_a"},
        ],
    )
    def test_snippets_mark_the_searched_words_only(
        self, worded: World, filters: dict[str, str]
    ) -> None:
        """A snippet marks the words searched for, never a value a filter or the visibility
        rule names ("workspace", "personal", "board", a tag, an outcome, "true")."""
        resp = worded.search("prn_p", "zebra", mode="text", include_hidden=True, **filters)
        assert resp.results
        for r in resp.results:
            marked = {m.lower() for m in re.findall(r"<mark>(.*?)</mark>", r.snippet)}
            assert marked == {"zebra"}, (r.id, r.snippet)

    def test_snippets_are_html_safe(self, shaped: World) -> None:
        for query in ("zebra", ""):
            r = next(r for r in shaped.search("prn_p", query, limit=25).results if r.id == "itm_s3")
            assert "<script>" not in r.snippet and "&lt;script&gt;" in r.snippet

    def test_meaning_only_match_shows_its_best_passage(self, shaped: World) -> None:
        resp = shaped.search("prn_p", "orchestrations", explain=True, limit=25)
        r = next(r for r in resp.results if r.id == "itm_s2")
        assert (
            r.explain is not None and r.explain.text_rank is None
        )  # "orchestrations" is not a word of it
        assert "<mark>" not in r.snippet
        assert (
            "orchestra sits left" in r.snippet
        )  # the passage sharing the query's stem, not the first
        assert "lunch0 " not in r.snippet
