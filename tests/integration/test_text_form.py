"""The OpenSearch text leg on the combined `content` field (mapping v4), on the real node: what it
matches (as shipped and in every form bench.quality --tune compares), how it highlights, and
that `suli reindex` fills the field from a v3 index."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from opensearchpy import OpenSearch

import mappings
from bench import text_forms
from indexer.inventory import live_index
from indexer.reindex import Reindexer
from suli.backends.base import LegQuery, PageQuery
from suli.backends.opensearch import OpenSearchBackend
from suli.embedding import FakeEmbedder
from suli.models import Filters, Item, Principal
from suli.settings import Settings
from suli.snippets import item_snippet
from suli.visibility import visibility_for

WS = "ws_tf"
EMB = FakeEmbedder()
ITEMS = [
    Item("itm_png", WS, "Logo", body="secretword", media_type="image/png",
         path="assets/brand_logo.png", caption="the round mark"),
    Item("itm_h", WS, "Zebra <b>title</b>", body="<script>x</script> zebra & co",
         caption="a zebra caption"),
    Item("itm_the", WS, "Notes", body="the end of the line"),
    Item("itm_tag", WS, "Plain", body="nothing here", tags=("kubernetes",)),
]  # fmt: skip


def _settings(url: str, alias: str) -> Settings:
    return Settings(opensearch_url=url, index_alias=alias, acl_index=f"{alias}-acl")


def _search(backend: OpenSearchBackend, text: str, fields: str = "stemmed") -> dict:
    vis = visibility_for(Principal("prn_x", WS), [])
    legs = backend.search(LegQuery(vis, Filters(), text, None, 10, fields))  # type: ignore[arg-type]
    assert not legs.errors, legs.errors
    return {h.id: h for h in legs.text}


def _snippet(backend: OpenSearchBackend, text: str, item_id: str, fields: str = "stemmed") -> str:
    """The snippet the core makes of a text hit from the item the page fetch read."""
    assert item_id in _search(backend, text, fields)
    vis = visibility_for(Principal("prn_x", WS), [])
    page = backend.page(PageQuery(vis, (item_id,), text=text, text_fields=fields))  # type: ignore[arg-type]
    return item_snippet(page.items[item_id], text, fields, True)  # type: ignore[arg-type]


@pytest.fixture
def backend(opensearch_url: str, make_index_name: Callable[[], str]) -> Iterator[OpenSearchBackend]:
    b = OpenSearchBackend(_settings(opensearch_url, make_index_name()), EMB.dimension)
    b.ensure_ready()
    assert not b.upsert([(it, EMB.embed_query(it.embed_text())) for it in ITEMS]).rejected
    b.refresh()
    yield b
    b.close()


FORMS = [
    None,  # as shipped
    text_forms.TextForm("most_fields"),
    text_forms.TextForm("cross_fields"),
    text_forms.TextForm("content", 0.0),
    text_forms.TextForm("content", 1.0),
]


def _form_id(f: text_forms.TextForm | None) -> str:
    return "shipped" if f is None else f"{f.kind}-{f.title_boost:g}"


@pytest.mark.parametrize("form", FORMS, ids=_form_id)
def test_every_form_matches_the_same_items(
    backend: OpenSearchBackend, form: text_forms.TextForm | None
) -> None:
    with contextlib.nullcontext() if form is None else text_forms.opensearch_form(form):
        # Binaries: by title, path and caption, never by their body.
        for text, found in (
            ("secretword", False), ("brand", True), ("round", True), ("logo", True)
        ):  # fmt: skip
            assert ("itm_png" in _search(backend, text)) == found, (form, text)
        assert set(_search(backend, "kubernetes")) == {"itm_tag"}  # tags copied into content
        assert set(_search(backend, "zebras")) == {"itm_h"}  # stemmed
        # The common-word rule's plain fields: "the" is a word there.
        assert set(_search(backend, "the", "plain")) == {"itm_png", "itm_the"}


def test_snippets_come_from_the_fields_not_the_combined_field(
    backend: OpenSearchBackend,
) -> None:
    """The words are found through the combined field; the snippet marks them where they stand
    in the item's own fields, body first, HTML-escaped."""
    assert _snippet(backend, "zebra", "itm_h") == (
        "&lt;script&gt;x&lt;/script&gt; <mark>zebra</mark> &amp; co"
    )
    assert _snippet(backend, "the", "itm_the", "plain") == (
        "<mark>the</mark> end of <mark>the</mark> line"
    )


def test_reindex_fills_the_combined_field_of_a_v3_index(
    opensearch_url: str, make_index_name: Callable[[], str], tmp_path: Path
) -> None:
    alias = make_index_name()
    client = OpenSearch(hosts=[opensearch_url])
    body = mappings.items_index(EMB.dimension, model=EMB.name)
    props = body["mappings"]["properties"]
    del props["content"]  # mapping v3: no combined field, no copy_to
    for f in ("title", "body", "caption", "tags"):
        props[f].pop("copy_to")
    body["mappings"]["_meta"]["mapping_version"] = 3
    old = f"{alias}-v3-20250101000000000000"
    client.indices.create(index=old, body=body)
    client.indices.put_alias(index=old, name=alias)
    backend = OpenSearchBackend(_settings(opensearch_url, alias), EMB.dimension, EMB.name)
    backend.ensure_ready()  # the ACL index; the alias already has its (old) index
    vectors = [EMB.embed_query(it.embed_text()) for it in ITEMS]
    assert not backend.upsert(list(zip(ITEMS, vectors, strict=True)), index=old).rejected
    backend.refresh()
    # In a v3 index only the title and the path answer: body, caption and tags reach the
    # text leg through `content`, which the index lacks.
    assert set(_search(backend, "zebra")) == {"itm_h"}  # its title
    for word in ("secretword", "round", "kubernetes", "end"):  # body, caption, tags, body
        assert _search(backend, word) == {}, word
    engine = Reindexer(backend, EMB, tmp_path / "rejects")
    engine.run(engine.plan())
    assert live_index(client, alias) != old
    assert set(_search(backend, "round")) == {"itm_png"}
    assert set(_search(backend, "kubernetes")) == {"itm_tag"}
    assert set(_search(backend, "end")) == {"itm_the"}
    backend.close()
    client.close()
