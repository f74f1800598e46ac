"""DESIGN 1: binaries (a media type that is not text) are found by title, path and caption
only. Their body is not text: it finds nothing, shows in no snippet and counts in no facet."""

from __future__ import annotations

import pytest

from .helpers import KeyedEmbedder, MakeSearcher, World, axis, item, principal

BODY = "zebra confidential figures"  # words only the binary's body holds


class BinaryRules:
    @pytest.fixture(scope="class")
    @classmethod
    def binaries(cls, make_searcher: MakeSearcher) -> World:
        photo = item(
            "itm_bin",
            "Team photo",
            BODY,
            media_type="image/png",
            path="assets/offsite/quokka.png",
            caption="everyone beside the harbour",
            kind="artifact",
        )
        note = item("itm_txt", "Crossing notes", "zebra stripes", kind="work-record")
        other = item("itm_other", "Budget", "quarterly numbers", kind="work-record")
        emb = KeyedEmbedder([("seaside snapshot", axis(1)), (photo, axis(1))])
        emb.set(note, axis(2))
        emb.set(other, axis(3))
        return make_searcher([photo, note, other], [principal("prn_a")], embedder=emb)

    @pytest.mark.parametrize("query", ["photo", "quokka", "harbour"])
    @pytest.mark.parametrize("mode", ["text", "hybrid"])
    def test_title_path_and_caption_find_it(self, binaries: World, query: str, mode: str) -> None:
        assert "itm_bin" in binaries.ids("prn_a", query, mode=mode)

    @pytest.mark.parametrize("mode", ["text", "hybrid"])
    @pytest.mark.parametrize("query", ["zebra", "confidential figures", "confidental"])
    def test_its_body_finds_nothing(self, binaries: World, query: str, mode: str) -> None:
        resp = binaries.search("prn_a", query, mode=mode, facets=True)
        assert "itm_bin" not in [r.id for r in resp.results]
        assert resp.facets is not None
        assert resp.total == resp.facets.total == len(resp.results)
        assert "artifact" not in dict(resp.facets.values.get("kind", []))  # the binary's kind

    @pytest.mark.parametrize(
        ("query", "mode"),
        [("harbour", "text"), ("quokka", "hybrid"), ("seaside snapshot", "hybrid")],
    )
    def test_its_snippet_never_shows_its_body(self, binaries: World, query: str, mode: str) -> None:
        """A word hit (highlighted) and a meaning-only hit (the best passage) alike."""
        [hit] = [r for r in binaries.search("prn_a", query, mode=mode).results if r.id == "itm_bin"]
        assert hit.snippet
        for word in BODY.split():
            assert word not in hit.snippet.lower(), hit.snippet

    def test_its_facets_count_it_for_its_own_words_only(self, binaries: World) -> None:
        got = binaries.searcher.facets(binaries.who("prn_a"))
        assert dict(got.values["kind"]) == {"artifact": 1, "work-record": 2}
        resp = binaries.search("prn_a", "quokka", mode="text", facets=True)
        assert resp.facets is not None and dict(resp.facets.values["kind"]) == {"artifact": 1}
