"""The corrections read ahead (suli.backends.opensearch.corrections): how a shard's rewrite is
read, when known corrections may be used, and the clauses they become. The engine's side is
tested on the real node (tests/contract/test_corrections.py)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from suli.backends.base import LegQuery
from suli.backends.opensearch import bodies, corrections
from suli.backends.opensearch.corrections import Corrections, Known, Newest, parse
from suli.models import Filters
from suli.visibility import Visibility

F = "content.plain"


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("(content.plain:protein)^0.85714287", {"protein": 0.85714287}),
        (
            "content.plain:protein (content.plain:proteins)^0.875",
            {"protein": 1.0, "proteins": 0.875},
        ),
        ("content.plain:zzqqxxyy~2", {}),  # no term near: the clause itself, not rewritten
        ('MatchNoDocsQuery("empty")', {}),
        ("", {}),
        ("(content.plain:don't)^0.8 (content.plain:3.14)^0.75", {"don't": 0.8, "3.14": 0.75}),
    ],
)
def test_a_rewrite_is_read_as_its_terms_and_weights(text: str, want: dict[str, float]) -> None:
    assert parse(text, F) == want


@pytest.mark.parametrize(
    "text",
    [
        "+content.plain:x",  # a required clause: not a plain list of terms
        "(content.plain:a b)^0.5",
        "title:protein",  # another field
        "(content.plain:protein)^x",
        "content.plain:",
        "(content.plain:protein)",
        "content.plain:protein~1 (content.plain:proteins)^0.875",
    ],
)
def test_anything_but_a_list_of_terms_keeps_the_fuzzy_clause(text: str) -> None:
    assert parse(text, F) is None


def test_a_term_that_looks_like_syntax_is_still_one_term() -> None:
    # path.plain splits on / . _ - and spaces only: `a)^0.5` is one term of a path.
    assert parse("(path.plain:a)^0.5)^0.75", "path.plain") == {"a)^0.5": 0.75}
    assert parse("(path.plain:x~9)^0.5", "path.plain") == {"x~9": 0.5}


def legs_body(known: Any) -> dict[str, Any]:
    q = LegQuery(Visibility("ws", "prn", frozenset()), Filters(), "protien budget", None, 10)
    return bodies.text_leg(q, None, known)


def test_known_words_go_as_their_terms_and_the_others_fuzzy() -> None:
    known = {"protien": [(F, "protein", 0.85714287), ("path.plain", "proteins", 0.875)]}
    body = str(legs_body(known))
    plain = str(legs_body(None))
    assert "'fuzziness'" in plain and plain.count("'fuzziness'") == 2  # both words fuzzy
    assert body.count("'fuzziness'") == 1  # "budget" only
    assert "{'term': {'content.plain': {'value': 'protein', 'boost': 0.85714287}}}" in body
    assert "{'term': {'path.plain': {'value': 'proteins', 'boost': 0.875}}}" in body
    # A word no term is near matches nothing, as its fuzzy clause would.
    assert "'match_none'" in str(legs_body({"protien": []}))


def fake(stamp: int | None, index: str = "idx-1") -> Corrections:
    """Corrections over a fake engine: every word reaches "protein", the newest write is at
    `stamp` (None: nothing stamped)."""

    def read(alias: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        field = body["query"]["multi_match"]["fields"][0]
        return [{"index": index, "valid": True, "explanation": f"({field}:protein)^0.8"}]

    def newest(alias: str, since: int) -> Newest:
        return Newest(stamp if stamp is not None and stamp >= since else None)

    return Corrections(read, lambda index: True, newest, bodies.TYPO_FIELDS, {})


def test_corrections_are_kept_only_when_the_index_has_settled() -> None:
    now = corrections.now_ms()
    quiet = fake(now - corrections.SETTLE_MS - 1000)
    quiet.want("alias", ["protien"])
    assert quiet.settle(10)
    got = quiet.known("alias", ["protien", "other"])
    assert set(got) == {"protien"}
    assert got["protien"].terms == ((F, "protein", 0.8), ("path.plain", "protein", 0.8))
    busy = fake(now)  # written a moment ago: nothing kept, nothing read for a while
    busy.want("alias", ["protien"])
    assert busy.settle(10)
    assert busy.known("alias", ["protien"]) == {}


def test_known_corrections_hold_only_while_nothing_newer_was_written() -> None:
    c = fake(None)

    def used() -> dict[str, Known]:
        c.want("alias", ["protien"])
        assert c.settle(10)
        return c.known("alias", ["protien"])

    got = used()
    read_at = got["protien"].read_at_ms
    assert c.since(got) == read_at - corrections.SETTLE_MS
    assert c.still_good("alias", got, Newest(None), {"idx-1"})  # nothing written since
    assert not c.still_good("alias", got, Newest(None), {"idx-2"})  # the alias moved
    assert c.known("alias", ["protien"]) == {}  # dropped
    assert not c.still_good("alias", used(), Newest(None), set())  # no hit: nothing to go by
    assert not c.still_good("alias", used(), None, {"idx-1"})  # the check failed
    newer = read_at - corrections.SETTLE_MS + 5
    assert not c.still_good("alias", used(), Newest(newer), {"idx-1"})
    # ... and nothing is used or read for the alias until that write has settled.
    c.want("alias", ["protien"])
    assert c.settle(10)
    assert c.known("alias", ["protien"]) == {}
    assert c.still_good("alias", {}, None, set())  # nothing used: nothing to check


def test_a_word_is_read_once_however_many_searches_ask() -> None:
    calls: list[str] = []
    gate = threading.Event()

    def read(alias: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        gate.wait(10)
        calls.append(body["query"]["multi_match"]["query"])
        return [{"index": "i", "valid": True, "explanation": "content.plain:word~1"}]

    c = Corrections(read, lambda i: True, lambda a, since: Newest(None), [F], {})
    for _ in range(5):
        c.want("alias", ["protien"])
    gate.set()
    assert c.settle(10)
    c.want("alias", ["protien"])  # known now (no term near it): not read again
    assert c.settle(10)
    assert calls == ["protien"]
    assert c.known("alias", ["protien"])["protien"].terms == ()


def test_an_unreadable_rewrite_or_an_unstamped_index_keeps_the_fuzzy_clause() -> None:
    odd = Corrections(
        lambda a, b: [{"index": "i", "valid": True, "explanation": "+content.plain:x"}],
        lambda i: True,
        lambda a, since: Newest(None),
        [F],
        {},
    )
    odd.want("alias", ["protien"])
    assert odd.settle(10) and odd.known("alias", ["protien"]) == {}
    old = fake(None)
    old._stamped = lambda index: False
    old.want("alias", ["protien"])
    assert old.settle(10) and old.known("alias", ["protien"]) == {}


def test_known_is_a_snapshot_kept_apart_per_alias() -> None:
    c = fake(None)
    c.want("a", ["protien"])
    assert c.settle(10)
    assert c.known("b", ["protien"]) == {}
    assert isinstance(c.known("a", ["protien"])["protien"], Known)
