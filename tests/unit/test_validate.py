"""Bad input is refused with a message naming the field; good input is normalised."""

import math
from datetime import UTC, date, datetime

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suli.errors import InvalidInput
from suli.search_params import search_request
from suli.validate import parse_acl, parse_item, parse_principal
from suli.vector_input import supplied_vector

GOOD = {"id": "itm_1", "workspace": "ws1", "title": "Deploy checklist"}


def test_item_defaults_and_scope() -> None:
    item = parse_item(
        {**GOOD, "uploader": "prn_a", "last_activity_at": "2026-01-02T03:04:05+02:00"}
    )
    assert item.scope == "personal" and item.kind == "artifact" and item.outcome is None
    assert item.last_activity_at == datetime(2026, 1, 2, 1, 4, 5, tzinfo=UTC)
    assert parse_item({**GOOD, "board": "brd_1", "uploader": "prn_a"}).scope == "board"
    assert parse_item({**GOOD, "updated_at": "2026-01-01T00:00:00Z"}).last_activity_at is not None


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"outcome": "great"}, "outcome"),
        ({"kind": "note"}, "kind"),
        ({"title": ""}, "title"),
        ({"id": "has space"}, "id"),
        ({"workspace": None}, "workspace"),
        ({"created_at": "yesterday"}, "created_at"),
        ({"created_at": "2026-01-01T00:00:00"}, "created_at"),  # no offset: ambiguous
        ({"tags": ["ok", ""]}, "tags"),
        ({"stations": [{"id": "s1"}]}, "stations.0.name"),
        ({"colour": "red"}, "colour"),
        ({"superseded_by": "itm_1"}, "superseded_by"),
    ],
)
def test_bad_items_name_the_field(patch: dict, field: str) -> None:
    with pytest.raises(InvalidInput) as e:
        parse_item({**GOOD, **patch})
    assert e.value.field == field
    assert field in e.value.message


def test_missing_required_and_non_object() -> None:
    with pytest.raises(InvalidInput) as e:
        parse_item({"id": "x", "workspace": "w"})
    assert e.value.field == "title"
    with pytest.raises(InvalidInput):
        parse_item(["not", "an", "object"])


def test_acl_and_principal() -> None:
    assert parse_acl({"board": "b", "workspace": "w", "members": ["p"]}).members == ("p",)
    assert parse_principal({"id": "p", "workspace": "w", "kind": "agent"}).kind == "agent"
    with pytest.raises(InvalidInput) as e:
        parse_principal({"id": "p", "workspace": "w", "kind": "robot"})
    assert e.value.field == "kind"


def test_search_request_parses_lists_and_dates() -> None:
    req = search_request(
        "  deploy  ",
        outcome="approved,failed",
        tag=["a", "b,c"],
        since="2026-01-01",
        until="2026-01-31",
    )
    assert req.query == "deploy"
    assert req.filters.outcomes == ("approved", "failed")
    assert req.filters.tags == ("a", "b", "c")
    assert (req.filters.since, req.filters.until) == (date(2026, 1, 1), date(2026, 1, 31))
    assert req.limit == 10


def test_recent_days() -> None:
    req = search_request("", recent_days=7, today=date(2026, 11, 30))
    assert req.filters.since == date(2026, 11, 24)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 26}, "limit"),
        ({"limit": True}, "limit"),
        ({"outcome": "approved,bogus"}, "outcome"),
        ({"kind": "note"}, "kind"),
        ({"since": "2026-02-01", "until": "2026-01-01"}, "since"),
        ({"since": "01/02/2026"}, "since"),
        ({"until": "2026-13-01"}, "until"),
        ({"recent_days": 0}, "recent_days"),
        ({"recent_days": 3, "since": "2026-01-01"}, "recent_days"),
        ({"regex": "(unclosed"}, "regex"),
        ({"regex": "(?=look)ahead"}, "regex"),
        ({"regex": r"(a)\1"}, "regex"),
        ({"regex": "a" * 201}, "regex"),
        ({"mode": "fuzzy"}, "mode"),
        ({"tag": [str(i) for i in range(51)]}, "tag"),
    ],
)
def test_bad_search_parameters(kwargs: dict, field: str) -> None:
    with pytest.raises(InvalidInput) as e:
        search_request("x", **kwargs)
    assert e.value.field == field


def test_huge_query_is_refused_but_syntax_is_just_text() -> None:
    with pytest.raises(InvalidInput) as e:
        search_request("x" * 1001)
    assert e.value.field == "query"
    assert search_request('title:(foo) AND "bar* ~2 \\').query == 'title:(foo) AND "bar* ~2 \\'


def _nested(depth: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


def test_structured_fields_have_a_depth_and_a_size_limit() -> None:
    from suli.validate import MAX_STRUCT_BYTES, MAX_STRUCT_DEPTH

    assert parse_item({**GOOD, "provenance": _nested(MAX_STRUCT_DEPTH)}).provenance
    for bad, words in (
        (_nested(MAX_STRUCT_DEPTH + 1), "deeper than 16"),
        (_nested(300), "deeper than 16"),
        ({"list": [[[[[[[[[[[[[[[[["x"]]]]]]]]]]]]]]]]]}, "deeper than 16"),
        ({"blob": "x" * MAX_STRUCT_BYTES}, "bytes as JSON"),
    ):
        with pytest.raises(InvalidInput) as e:
            parse_item({**GOOD, "provenance": bad})
        assert e.value.field == "provenance" and words in e.value.message


@pytest.mark.parametrize(
    "url", ["", "https://app.example/items/1", "http://x.y", "HTTPS://A.B/c", "/items/itm_1"]
)
def test_web_and_relative_urls_are_kept(url: str) -> None:
    assert parse_item({**GOOD, "url": url}).url == url


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "JavaScript:alert(1)",
        "java\tscript:alert(1)",
        "data:text/html,<script>x</script>",
        "vbscript:x",
        "file:///etc/passwd",
        "//evil.example/x",
        "/\\evil.example",
        "items/1",
        "http:/x",
        "https://",
    ],
)
def test_other_url_schemes_are_refused_naming_url(url: str) -> None:
    with pytest.raises(InvalidInput) as e:
        parse_item({**GOOD, "url": url})
    assert e.value.field == "url" and e.value.message.startswith("url: ")


# ---- vectors a line brings -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("vector", "model", "field", "words"),
    [
        ([0.0] * 4, "m", "vector", "zero"),
        ([0, -0.0, 0, 0], "m", "vector", "zero"),
        ([1.0] * 3, "m", "vector", "expected 4 dimensions, got 3"),
        ([1.0, math.nan, 1.0, 1.0], "m", "vector", "finite"),
        ([1.0, math.inf, 1.0, 1.0], "m", "vector", "finite"),
        ([1.0, 10**400, 1.0, 1.0], "m", "vector", "finite"),
        ([1.0, True, 1.0, 1.0], "m", "vector", "list of numbers"),
        ([1.0, "1", 1.0, 1.0], "m", "vector", "list of numbers"),
        ("1,1,1,1", "m", "vector", "list of numbers"),
        (None, "m", "vector", "list of numbers"),
        ([1.0] * 4, "other", "vector_model", "'other'"),
        ([1.0] * 4, ["m"] * 10_000, "vector_model", "…"),  # quoted, but cut short
    ],
)
def test_a_vector_that_cannot_be_used_is_refused_naming_the_field(
    vector: object, model: object, field: str, words: str
) -> None:
    with pytest.raises(InvalidInput) as e:
        supplied_vector(vector, model, "m", 4)
    assert e.value.field == field and e.value.message.startswith(f"{field}: ")
    assert words in e.value.message and len(e.value.message) < 200


DIRECTION = st.lists(
    st.floats(min_value=-1, max_value=1, allow_nan=False), min_size=8, max_size=8
).filter(lambda u: max(abs(x) for x in u) >= 0.1)


@settings(max_examples=500, deadline=None, database=None, derandomize=True)
@given(DIRECTION, st.integers(min_value=-290, max_value=290))
def test_a_usable_vector_is_stored_at_unit_length_in_its_own_direction(
    u: list[float], exponent: int
) -> None:
    scaled = [x * 10.0**exponent for x in u]
    got = supplied_vector(scaled, "m", "m", 8)
    expected = np.asarray(u) / np.linalg.norm(np.asarray(u))  # the direction, at no scale
    assert np.allclose(got, expected, rtol=0, atol=1e-9)
    assert math.isclose(math.fsum(x * x for x in got), 1.0, rel_tol=1e-12)
