"""suli.search_params.request_from: every edge's names reach search_request unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.mcp_server import SEARCH_ARGS
from app.schemas import FacetsQuery, SearchQuery, SearchRequest
from cli.search import facets as facets_command
from cli.search import search as search_command
from suli.errors import InvalidInput
from suli.search_params import request_from, search_request

# HTTP's names for the two parameters it spells differently, written out here rather than
# read from the module under test.
HTTP_NAME = {"query": "q", "include_hidden": "hidden"}


def _http(params: dict[str, Any]) -> dict[str, Any]:
    return {HTTP_NAME.get(k, k): v for k, v in params.items()}


words = st.sampled_from(["deploy", "incident review", "", "  rollback plan ", "zq"])
some = st.lists(st.sampled_from(["a", "b", "brd_x"]), max_size=3)
params = st.fixed_dictionaries(
    {},
    optional={
        "query": words,
        "kind": st.sampled_from(["artifact", "work-record", "artifact,work-record"]),
        "outcome": st.lists(st.sampled_from(["approved", "failed", "in-progress"]), max_size=3),
        "board": some,
        "agent": st.sampled_from(["prn_bot", "prn_a,prn_b"]),
        "station": some,
        "tag": some,
        "since": st.sampled_from(["2026-01-01", "2026-06-30"]),
        "until": st.sampled_from(["2026-07-01", "2026-12-31"]),
        "limit": st.integers(1, 25),
        "regex": st.sampled_from(["dep.oy", "^incident"]),
        "mode": st.sampled_from(["hybrid", "text", "vector"]),
        "explain": st.booleans(),
        "include_hidden": st.booleans(),
        "cursor": st.sampled_from(["abc", "next-page-token"]),
        "facets": st.booleans(),
    },
)


@settings(max_examples=400, deadline=None)
@given(params, st.sets(st.sampled_from(["kind", "board", "mode", "cursor", "explain"])))
def test_core_and_http_names_give_the_request_search_request_gives(
    given_params: dict[str, Any], unset: set[str]
) -> None:
    expected = search_request(given_params.get("query"), **{
        k: v for k, v in given_params.items() if k != "query"
    })  # fmt: skip
    # An edge that leaves a parameter out passes None (an unset option, an absent argument).
    with_none = {**given_params, **{k: None for k in unset if k not in given_params}}
    assert request_from(with_none) == expected
    assert request_from(_http(with_none)) == expected


def test_none_means_not_given_so_the_default_applies() -> None:
    req = request_from({"q": None, "mode": None, "limit": None, "hidden": None})
    assert (req.query, req.mode, req.limit, req.filters.include_hidden) == ("", "hybrid", 10, False)


def test_the_settings_query_length_applies() -> None:
    assert request_from({"q": "x" * 30}, max_query_chars=30).query == "x" * 30
    with pytest.raises(InvalidInput) as e:
        request_from({"q": "x" * 31}, max_query_chars=30)
    assert e.value.field == "query"


def test_a_parameter_under_both_its_names_is_refused_naming_it() -> None:
    with pytest.raises(InvalidInput) as e:
        request_from({"query": "a", "q": "b"})
    assert e.value.field == "q" and "not both" in e.value.message
    with pytest.raises(InvalidInput):
        request_from({"hidden": True, "include_hidden": None})


def test_a_name_no_edge_should_send_is_a_bug_not_ignored() -> None:
    with pytest.raises(TypeError, match="'limt'"):
        request_from({"limt": 5})
    with pytest.raises(TypeError, match="max_query_chars"):
        request_from({"max_query_chars": 5})  # only from the settings


def test_validation_errors_still_name_the_field() -> None:
    with pytest.raises(InvalidInput) as e:
        request_from({"q": "x", "limit": 26})
    assert e.value.field == "limit"


@pytest.mark.parametrize("model", [SearchQuery, SearchRequest, FacetsQuery])
def test_every_http_field_is_a_search_parameter(model: type) -> None:
    # model_dump(mode="json") of the defaults is what a bare request hands over (app.routes_search).
    assert request_from(model().model_dump(mode="json")) == search_request("")


def test_every_cli_flag_and_mcp_argument_is_a_search_parameter() -> None:
    for command in (search_command, facets_command):
        names = {p.name for p in command.params if isinstance(p.name, str)}
        flags = names - {"words", "principal_id", "url", "token", "as_json"}
        request_from(dict.fromkeys(flags))  # raises TypeError on a name it does not know
    request_from(dict.fromkeys(set(SEARCH_ARGS) - {"max_results"}))
