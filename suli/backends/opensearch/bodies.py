"""Pure builders of OpenSearch request bodies (tested against golden JSON); documents and
responses are read and written by suli.backends.opensearch.docs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC
from typing import Any

from suli.backends.base import FACET_CAP, BrowseKey, LegQuery, MatchSet, PageQuery, TextFields
from suli.backends.opensearch import visdocs
from suli.backends.opensearch.docs import doc_to_item as doc_to_item  # callers import it here
from suli.backends.opensearch.docs import item_to_doc as item_to_doc
from suli.counting import own_filter_lifted, without_facet_filters
from suli.models import Filters
from suli.text import (
    FUZZY_MIN_CHARS,
    PREFIX_LENGTH,
    TWO_EDITS_CHARS,
    TYPO_WEIGHT,
    prefix_word,
    typo_words,
)
from suli.visibility import Visibility

# The text leg scores one combined field (title, body, caption and tags via copy_to), as FTS5
# ranks the columns as one document, plus the title alone and the path, summed (`most_fields`);
# `path` stays apart because its analyzer splits on / . _ -.
CONTENT_FIELD: dict[TextFields, str] = {"stemmed": "content", "plain": "content.plain"}
TITLE_FIELD: dict[TextFields, str] = {"stemmed": "title", "plain": "title.plain"}
PATH_FIELD: dict[TextFields, str] = {"stemmed": "path", "plain": "path.plain"}
# The title field's boost on top of `content` (DESIGN 3.1: the title weighs more, mildly).
# Chosen by `python -m bench.quality --tune` on NFCorpus dev (docs/decisions.md), against
# 0.5, 1 and mapping v3's per-field forms, which bench/text_forms.py builds for the sweep.
TITLE_BOOST = 0.25


def exact_match(text: str, flavour: TextFields) -> dict[str, Any]:
    """The exact-word clause of the text leg. multi_match analyses the text; it never parses
    query syntax (unlike query_string)."""
    fields = [
        CONTENT_FIELD[flavour],
        f"{TITLE_FIELD[flavour]}^{TITLE_BOOST:g}",
        PATH_FIELD[flavour],
    ]
    return {"multi_match": {"query": text, "fields": fields, "type": "most_fields"}}


# The last word's prefix (it may be half typed) is one constant-score clause of this weight.
PREFIX_BOOST = 0.1
# The corrections each query word expands to, nearest first (Lucene's own cap is the engine's
# `indices.query.bool.max_clause_count`, 1,024 by default, whichever is lower): far above what a
# word reaches within its edits and fixed first letter, so another tenant's near-misses cannot
# crowd a visible correction out (tests/contract/rules_typos.py plants 64).
TYPO_TERMS = 1024


# The fields the typo clauses correct against, unstemmed (typo_clauses), and the fuzzy
# clause's own settings: the engine rewrites exactly this clause when the corrections are read
# ahead (suli.backends.opensearch.corrections).
TYPO_FIELDS = [CONTENT_FIELD["plain"], PATH_FIELD["plain"]]
FUZZY = {
    "type": "most_fields",
    "fuzziness": f"AUTO:{FUZZY_MIN_CHARS},{TWO_EDITS_CHARS}",
    "prefix_length": PREFIX_LENGTH,
    "fuzzy_transpositions": True,
    "fuzzy_rewrite": f"top_terms_{TYPO_TERMS}",
}
# A word's corrections as the engine's rewrite reached them: (field, term, weight).
Corrections = Mapping[str, Sequence[tuple[str, str, float]]]


def typo_clauses(
    text: str, flavour: TextFields, known: Corrections | None = None
) -> list[dict[str, Any]]:
    """The clauses that forgive typos: the longer words fuzzy (the edits of
    suli.text.max_edits, the first letter fixed) and the last word as a prefix. Common words are
    never fuzzed, and a query of only common words ("plain") has none. Both take only the
    words the Python side picked (suli.text): nothing of the user's text is syntax.

    A fuzzy word scores each correction it reaches by that term's own BM25 (`top_terms_N`:
    a scoring boolean over the nearest TYPO_TERMS terms), weighed by TYPO_WEIGHT: the rarer the
    word meant, the more its correction counts, as the word itself would. Each term is scored by
    its own statistics, not blended with the others' (`top_terms_blended_freqs_N`, Lucene's
    default), so a near-miss that only another tenant's items hold changes no visible item's
    score. The prefix is a constant score over every term it reaches (PREFIX_BOOST).

    A word in `known` goes as that boolean itself: its corrections as `term` clauses with the
    rewrite's weights (read ahead and checked fresh by suli.backends.opensearch.corrections),
    which scores every document as the fuzzy clause does without walking the term
    dictionaries again."""
    if flavour == "plain":
        return []
    # On the unstemmed fields, as the embedded store corrects against its unstemmed
    # vocabulary: a typo is an edit of the word, and a stem cut short ("orchestrations" ->
    # "orchestr") would reach words ("orchestra") the query never came near.
    # The word as the exact clause matches it (stemmed): an item the exact clause scores for
    # the word ("cancers" for "cancer") gains nothing from its corrections on top.
    exact_fields = [CONTENT_FIELD[flavour], PATH_FIELD[flavour]]

    def unless_exact(clause: dict[str, Any], word: str, boost: float) -> dict[str, Any]:
        # Only where the word itself is absent: an item holding it gains nothing, so the
        # clauses never tilt a ranking of exact words (towards long words, or the last one).
        exact = {"multi_match": {"query": word, "fields": exact_fields}}
        return {"bool": {"must": [clause], "must_not": [exact], "boost": boost}}

    out: list[dict[str, Any]] = []
    for word in typo_words(text):
        terms = (known or {}).get(word)
        fuzzy: dict[str, Any]
        if terms is not None:
            should = [{"term": {f: {"value": t, "boost": w}}} for f, t, w in terms]
            fuzzy = {"bool": {"should": should or [{"match_none": {}}]}}
        else:
            fuzzy = {"multi_match": {"query": word, "fields": list(TYPO_FIELDS), **FUZZY}}
        out.append(unless_exact(fuzzy, word, TYPO_WEIGHT))
    last = prefix_word(text)
    if last is not None:
        # On the unstemmed field: a half-typed word is a prefix of the word, not of its stem.
        # `last` is a lower-cased \w+ run: no wildcard or syntax reaches the engine.
        prefix = {"prefix": {CONTENT_FIELD["plain"]: {"value": last, "rewrite": "constant_score"}}}
        out.append(unless_exact(prefix, last, PREFIX_BOOST))
    return out


def text_match(text: str, flavour: TextFields, known: Corrections | None = None) -> dict[str, Any]:
    """The scoring clause of the text leg: the exact words, or any of the typo clauses."""
    exact = exact_match(text, flavour)
    typos = typo_clauses(text, flavour, known)
    if not typos:
        return exact
    return {"bool": {"should": [exact, *typos], "minimum_should_match": 1}}


SOURCE_EXCLUDES = ["vector", "embedded_text_sha"]
MAX_DETERMINIZED_STATES = (
    10_000  # bounds a regex's automaton: a hostile pattern errors, never hangs
)


def visibility_clause(vis: Visibility) -> dict[str, Any]:
    """DESIGN section 2 as one bool filter: workspace AND (workspace-wide OR my board OR mine)."""
    by_token = isinstance(vis.stored, visdocs.TokenBoards)
    # Known only by the token: the workspace and the principal id are looked up in the
    # token's document too (no document: nothing matches).
    mine = {"terms": {"uploader": visdocs.lookup(vis, "principal_id")}} if by_token else None
    ours = {"terms": {"workspace": visdocs.lookup(vis, "workspace")}} if by_token else None
    should: list[dict[str, Any]] = [
        {"term": {"scope": "workspace"}},
        {
            "bool": {
                "filter": [
                    {"term": {"scope": "personal"}},
                    mine or {"term": {"uploader": vis.principal_id}},
                ]
            }
        },
    ]
    if vis.stored is not None:
        # A terms lookup: the engine reads the boards from the principal's visibility
        # document (a realtime get) inside this same request.
        lookup = {"index": vis.stored.index, "id": vis.stored.doc, "path": "board"}
        should.insert(1, {"terms": {"board": lookup}})
    elif vis.boards:
        should.insert(1, {"terms": {"board": sorted(vis.boards)}})
    return {
        "bool": {
            "filter": [ours or {"term": {"workspace": vis.workspace}}],
            "should": should,
            "minimum_should_match": 1,
        }
    }


def regex_clause(pattern: str) -> dict[str, Any]:
    """Regex anywhere in title or body, case-insensitive, on the wildcard sub-fields."""
    anchored_start = pattern.startswith("^")
    anchored_end = pattern.endswith("$") and not pattern.endswith("\\$")
    core = pattern[1 if anchored_start else 0 : len(pattern) - (1 if anchored_end else 0)]
    core = core.replace('"', '\\"')  # '"' opens a literal in Lucene's syntax
    value = f"{'' if anchored_start else '.*'}({core}){'' if anchored_end else '.*'}"

    def one(field: str) -> dict[str, Any]:
        return {
            "regexp": {
                field: {
                    "value": value,
                    "flags": "NONE",
                    "case_insensitive": True,
                    "max_determinized_states": MAX_DETERMINIZED_STATES,
                }
            }
        }

    return {"bool": {"should": [one("title.wc"), one("body.wc")], "minimum_should_match": 1}}


def filter_clauses(
    vis: Visibility, filters: Filters, regex: str | None = None, *, hidden_ok: bool = False
) -> list[dict[str, Any]]:
    """Every filter of a request, visibility first; the same list goes into both legs."""
    out: list[dict[str, Any]] = [visibility_clause(vis), *facet_clauses(filters)]
    if filters.since or filters.until:
        rng: dict[str, Any] = {}
        if filters.since:
            rng["gte"] = f"{filters.since.isoformat()}||/d"  # start of that UTC day
        if filters.until:
            rng["lte"] = f"{filters.until.isoformat()}||/d"  # rounds up: end of that UTC day
        out.append({"range": {"last_activity_at": rng}})
    if not (filters.include_hidden or hidden_ok):
        out.append({"bool": {"must_not": [{"term": {"hidden": True}}]}})
    if filters.exclude_ids:  # item ids, not storage keys (`_id` is workspace/id)
        out.append({"bool": {"must_not": [{"terms": {"id": list(filters.exclude_ids)}}]}})
    if regex:
        out.append(regex_clause(regex))
    return out


def facet_clauses(filters: Filters) -> list[dict[str, Any]]:
    """The filters a facet offers values for (suli.counting.FACET_FILTERS), in that order."""
    out: list[dict[str, Any]] = []
    if filters.kinds:
        out.append({"terms": {"kind": list(filters.kinds)}})
    if filters.outcomes:
        out.append({"terms": {"outcome": list(filters.outcomes)}})
    if filters.boards:
        out.append({"terms": {"board": list(filters.boards)}})
    if filters.agents:
        out.append({"terms": {"agent": list(filters.agents)}})
    if filters.stations:
        values = list(filters.stations)
        out.append(
            {
                "bool": {
                    "should": [
                        {"terms": {"stations.id": values}},
                        {"terms": {"stations.name": values}},
                    ],
                    "minimum_should_match": 1,
                }
            }
        )
    if filters.tags:
        out.append({"terms": {"tags": list(filters.tags)}})
    return out


# What fusion, the gates, explain and the page read of a leg's hit: read from doc values, so
# no hit's `_source` (its body) is loaded; the page's items are fetched apart (page_bodies).
LEG_FIELDS = ["id", "outcome", "superseded_by"]
# The text leg's order, made explicit so it can be continued (`search_after`): ties by item id,
# which no segment merge renumbers (docs/decisions.md, "Ties are ordered by item id").
# `unmapped_type`: an index under the alias without the field (a botched migration) still
# answers instead of failing its shard.
TEXT_SORT = [{"_score": {"order": "desc"}}, {"id": {"order": "asc", "unmapped_type": "keyword"}}]


def _lean(size: int) -> dict[str, Any]:
    # `stored_fields: _none_`: a hit's stored fields (its `_id` and `_source`, which share one
    # compressed block with the vector's JSON) are not read at all; without it the fetch phase
    # decompresses that block for every candidate just to name its `_id`, which the legs never
    # read (the item id comes from doc values): 14 % of the legs' node CPU at 100k
    # (bench/RESULTS.md section 19).
    return {
        "size": size,
        "track_total_hits": False,
        "_source": False,
        "stored_fields": "_none_",
        "docvalue_fields": LEG_FIELDS,
    }


def text_leg(
    q: LegQuery, after: Sequence[Any] | None = None, known: Corrections | None = None
) -> dict[str, Any]:
    """BM25 over title, body, caption, path and tags; user text goes in as plain words only.

    It starts after the sort values `after` (text_anchor's hit's), else at `q.text_offset`;
    the words in `known` go with their corrections (typo_clauses)."""
    assert q.text is not None
    body = {
        **_lean(q.depth),
        "query": {
            "bool": {
                "must": [text_match(q.text, q.text_fields, known)],
                "filter": filter_clauses(q.vis, q.filters, q.regex),
            }
        },
        "sort": TEXT_SORT,
    }
    if after is not None:
        body["search_after"] = list(after)
    elif q.text_offset:
        body["from"] = q.text_offset
    return body


def text_anchor(q: LegQuery) -> dict[str, Any]:
    """The text leg narrowed to the hit it continues after (`q.text_after`, an item id): its
    sort values, as the engine scores it now, are where the leg's window starts. They are
    found here rather than carried by the cursor: a score moves with every tenant's
    documents, so a cursor holding one would tell the caller how many hold its words."""
    assert q.text_after is not None
    body = text_leg(replace(q, depth=1, text_offset=0))
    body["query"]["bool"]["filter"].append({"term": {"id": q.text_after}})
    return body


def vector_leg(q: LegQuery, ef_search: int | None = None) -> dict[str, Any]:
    """Filtered k-NN: the visibility and filters sit inside the knn clause (no post-filtering).

    k is the candidate depth the fusion needs. ef_search, when set, widens the graph search
    without asking for more candidates: on the Lucene engine (k-NN 2.19) the node searches
    with max(k, ef_search) and may return that many hits, so `size` keeps the answer at k.

    Nothing of the words rides here: which meaning hits the words also match is asked by the
    page fetch, and only when `total` needs it (words_body)."""
    assert q.vector is not None
    knn: dict[str, Any] = {
        "vector": [float(x) for x in q.vector],
        "k": q.depth,
        "filter": {"bool": {"filter": filter_clauses(q.vis, q.filters, q.regex)}},
    }
    if ef_search is not None:
        knn["method_parameters"] = {"ef_search": ef_search}
    query: dict[str, Any] = {"knn": {"vector": knn}}
    return {**_lean(q.depth), "query": query}


def page_bodies(q: PageQuery) -> list[dict[str, Any]]:
    """The page's items under the caller's visibility and the search's filters, applied
    again (an item made invisible since the legs ran is simply absent), and the words' check
    where `total` needs it. Nothing is highlighted: the core makes the snippets."""
    out = [_page_body(q, list(q.ids))]
    if q.words_of:
        out.append(words_body(q))
    return out


WORDS_AGG = "words"  # the words body's bucket of ids


def words_body(q: PageQuery) -> dict[str, Any]:
    """Which of the meaning-only hits `q.words_of` the text leg's words match: its scoring
    clause (in filter context: nothing is scored) narrowed to those ids, the ids read back as
    one bucket each (`size` 0: no fetch phase; `map`: no global ordinals of the id field, which
    every refresh would make the engine build again). Asked only for a text leg cut at depth,
    where one of them may be a word match further down (suli.counting). The ids are the vector
    leg's, which held them under the search's visibility and filters already: repeating those
    here would read the visibility document again, for an answer that names no other item."""
    assert q.text is not None
    return {
        "size": 0,
        "track_total_hits": False,
        "query": {
            "bool": {
                "filter": [
                    text_match(q.text, q.text_fields),
                    {"terms": {"id": list(q.words_of)}},
                ]
            }
        },
        "aggs": {
            WORDS_AGG: {"terms": {"field": "id", "size": len(q.words_of), "execution_hint": "map"}}
        },
    }


def _page_body(q: PageQuery, ids: list[str]) -> dict[str, Any]:
    return {
        "size": len(ids),
        "_source": {"excludes": SOURCE_EXCLUDES},
        "query": {
            "bool": {
                "filter": [
                    *filter_clauses(q.vis, q.filters, q.regex),
                    {"terms": {"id": ids}},
                ]
            }
        },
    }


# OpenSearch's sort value of a document without the sort field, sorted descending with
# `missing: _last` (Long.MIN_VALUE): what search_after must repeat to continue past it.
MISSING_DESC = -(2**63)


def browse_key(after: BrowseKey) -> list[Any]:
    """browse_body's sort values for an item at (last_activity_at, id): epoch milliseconds,
    as the engine keeps a `date`."""
    when, item_id = after
    if when is None:
        return [MISSING_DESC, item_id]
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    return [int(when.timestamp() * 1000), item_id]


def browse_body(
    vis: Visibility,
    filters: Filters,
    limit: int,
    regex: str | None = None,
    *,
    offset: int = 0,
    after: BrowseKey | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "size": limit,
        "track_total_hits": True,
        "_source": {"excludes": SOURCE_EXCLUDES},
        "query": {"bool": {"filter": filter_clauses(vis, filters, regex)}},
        "sort": [
            {"last_activity_at": {"order": "desc", "missing": "_last"}},
            {"id": {"order": "asc"}},
        ],
    }
    if after is not None:
        body["search_after"] = browse_key(after)
    elif offset:
        body["from"] = offset
    return body


def ids_body(vis: Visibility, ids: Sequence[str], source: Any = None) -> dict[str, Any]:
    """Visible items among ids; hidden items are included (a direct lookup may name them).

    By the `id` field, not `_id`: the visibility clause holds the lookup to the caller's
    workspace, and reads work alike before and after `suli reindex` moved `_id`s to keys."""
    return {
        "size": len(ids),
        "_source": source if source is not None else {"excludes": SOURCE_EXCLUDES},
        "query": {
            "bool": {
                "filter": [
                    *filter_clauses(vis, Filters(), hidden_ok=True),
                    {"terms": {"id": list(ids)}},
                ]
            }
        },
    }


FACET_FIELDS = {
    "kind": "kind",
    "outcome": "outcome",
    "board": "board",
    "agent": "agent",
    "station": "stations.name",
    "tag": "tags",
}


def match_clause(vis: Visibility, filters: Filters, match: MatchSet) -> dict[str, Any]:
    """The items a search matched: the text leg's own query (so counts follow any change to
    it) or, under the same filters, one of the kept meaning-only hits."""
    if match.every:
        return {"bool": {"filter": filter_clauses(vis, filters, match.regex)}}
    should: list[dict[str, Any]] = []
    if match.text is not None:
        leg = LegQuery(vis, filters, match.text, None, 0, match.text_fields, match.regex)
        should.append(text_leg(leg)["query"])
    if match.ids:
        should.append(
            {
                "bool": {
                    "filter": [
                        *filter_clauses(vis, filters, match.regex),
                        {"terms": {"id": list(match.ids)}},
                    ]
                }
            }
        )
    if not should:
        return {"bool": {"must_not": [{"match_all": {}}]}}
    return {"bool": {"should": should, "minimum_should_match": 1}}


def facets_body(
    vis: Visibility, filters: Filters, match: MatchSet | None = None, cap: int = FACET_CAP
) -> dict[str, Any]:
    """An exact count and, unless cap is 0, cap + 1 values per facet (the extra one says
    `more`), counted disjunctively (suli.counting): the query holds the matches under every
    filter but the facets' own, `post_filter` adds those for the count, and each facet's
    aggregation adds every facet's filter but its own. Nothing is scored."""
    base = without_facet_filters(filters)
    query: dict[str, Any] = {"bool": {"filter": filter_clauses(vis, base)}}
    if match is not None:
        query = {"bool": {"filter": [match_clause(vis, base, match)]}}
    body: dict[str, Any] = {"size": 0, "track_total_hits": True, "query": query}
    ticked = facet_clauses(filters)
    if ticked:
        body["post_filter"] = {"bool": {"filter": ticked}}
    if cap:
        others = dict(own_filter_lifted(filters))
        body["aggs"] = {
            name: {
                "filter": {"bool": {"filter": facet_clauses(others.get(name, filters))}},
                "aggs": {"values": {"terms": {"field": f, "size": cap + 1}}},
            }
            for name, f in FACET_FIELDS.items()
        }
    return body


def facets_bodies(
    vis: Visibility, filters: Filters, match: MatchSet | None = None, cap: int = FACET_CAP
) -> list[dict[str, Any]]:
    """facets_body, then for each ticked facet with meaning-only hits of its own
    (MatchSet.lifted) one body counting only that facet, over the words and those hits."""
    out = [facets_body(vis, filters, match, cap)]
    if match is None or not cap:
        return out
    for name, _ in match.lifted:
        body = facets_body(vis, filters, match.for_facet(name), cap)
        body.pop("post_filter", None)  # nothing but the facet's aggregation is read
        out.append({**body, "track_total_hits": False, "aggs": {name: body["aggs"][name]}})
    return out


def referencing_body(vis: Visibility, item_id: str, limit: int) -> dict[str, Any]:
    return {
        "size": limit,
        "_source": {"excludes": SOURCE_EXCLUDES},
        "query": {
            "bool": {"filter": [*filter_clauses(vis, Filters()), {"term": {"references": item_id}}]}
        },
        "sort": [{"last_activity_at": {"order": "desc", "missing": "_last"}}, {"id": "asc"}],
    }


def stored_hashes_body(ids: Sequence[str]) -> dict[str, Any]:
    """The stored embed hash of the documents with these `_id`s (an admin read of the
    indexer's own items: no visibility applies)."""
    return {
        "size": len(ids),
        "query": {"ids": {"values": list(ids)}},
        "_source": ["id", "workspace", "embedded_text_sha"],
        "seq_no_primary_term": True,
    }
