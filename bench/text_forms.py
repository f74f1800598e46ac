"""The word-leg variants bench.tuning measures beside the shipped ones, built here, not in suli.

OpenSearch ships one exact-word clause: the combined `content` field + title^TITLE_BOOST +
path (suli.backends.opensearch.bodies.exact_match). The sweep also tries other title boosts
and mapping v3's per-field forms, built below from the product's field names. The embedded
store ships bm25() + TITLE_BOOST x a title-only bm25() (suli.backends.embedded.sql.bm25_call);
the sweep tries other weights of that term.

A variant is put in place in this process only and for one `with` block, by replacing the
product's pure builder (OpenSearch) or the constant its builder reads (embedded), as
bench.typos does for the typo weight: the backends hold no switch a caller could flip.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal
from unittest import mock

from suli.backends.base import TextFields
from suli.backends.embedded import sql
from suli.backends.opensearch import bodies
from suli.text import FIELD_WEIGHTS

TextFormKind = Literal["content", "most_fields", "cross_fields"]


@dataclass(frozen=True, slots=True)
class TextForm:
    """How the OpenSearch text leg scores a document's fields.

    content       BM25 over one combined field, like FTS5 ranks the columns as one document,
                  plus title^title_boost (0: none) and path, summed (the shipped kind)
    most_fields   BM25 per field, summed (mapping v3)
    cross_fields  term-centric: each word scored in its best field with blended statistics
    """

    kind: TextFormKind = "content"
    title_boost: float = 0.0


# What the product sends (tests/unit/test_bench_text_forms.py checks the two agree).
SHIPPED = TextForm("content", bodies.TITLE_BOOST)

_W = FIELD_WEIGHTS
# Per-field lists of the `most_fields` and `cross_fields` forms (mapping v3's query).
TEXT_FIELDS: dict[TextFields, list[str]] = {
    "stemmed": [f"title^{_W['title']}", "body", "caption", "path", f"tags.text^{_W['tags']}"],
    "plain": [
        f"title.plain^{_W['title']}",
        "body.plain",
        "caption.plain",
        "path.plain",
        f"tags.plain^{_W['tags']}",
    ],
}


def exact_match(text: str, flavour: TextFields, form: TextForm) -> dict[str, Any]:
    """bodies.exact_match as `form` would build it."""
    if form.kind == "content":
        fields = [bodies.CONTENT_FIELD[flavour], bodies.PATH_FIELD[flavour]]
        if form.title_boost > 0:
            fields.insert(1, f"{bodies.TITLE_FIELD[flavour]}^{form.title_boost:g}")
        return {"multi_match": {"query": text, "fields": fields, "type": "most_fields"}}
    return {"multi_match": {"query": text, "fields": TEXT_FIELDS[flavour], "type": form.kind}}


@contextmanager
def opensearch_form(form: TextForm) -> Iterator[None]:
    """Every OpenSearch body with the words (text leg, its anchor, the page's words check,
    the facets' match) scored by `form`, in this process, inside the block."""
    with mock.patch.object(bodies, "exact_match", partial(exact_match, form=form)):
        yield


@contextmanager
def embedded_title_boost(weight: float) -> Iterator[None]:
    """The embedded word leg with its title-only bm25() weighed by `weight`, inside the block."""
    with mock.patch.object(sql, "TITLE_BOOST", weight):
        yield
