"""bench.embedded_long: its buckets, and a tiny A/B run of two workers on a synthetic store
(the same tree on both sides, so every answer must agree, and agree with an in-process run)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np

from bench import embedded_long as el
from suli.backends.embedded import EmbeddedBackend
from suli.models import Principal, SearchRequest
from suli.service import Searcher
from suli.settings import Settings


def test_buckets_by_word_count_and_sentence_heads() -> None:
    assert el.bucket_of("vitamin d") == "1-3 words"
    assert el.bucket_of("does a low-fat diet help? yes") == "4-8 words"  # low, fat: two words
    assert el.bucket_of(" ".join(["w"] * 20)) == "9-20 words"
    assert el.bucket_of(" ".join(["w"] * 21)) is None
    assert el.bucket_of("...") is None
    body = "Short one. " + " ".join(f"w{i}" for i in range(30)) + ". Tail."
    assert el.first_words(body) == " ".join(f"w{i}" for i in range(15))
    assert el.first_words("Too short. Also short.") is None
    assert el.pct([5.0, 1.0, 3.0], 50) == 3.0 and el.pct([1.0, 2.0, 9.0], 99) == 9.0


def test_a_tiny_ab_run_reports_each_bucket_and_the_same_answers(tmp_path: Path) -> None:
    out = tmp_path / "long.txt"
    got = el.main(
        ["--against", str(el.ROOT), "--no-nfcorpus", "--synthetic", "300", "--dir",
         str(tmp_path), "--per-bucket", "4", "--rounds", "2", "--cold", "--out", str(out),
         "--json", str(tmp_path / "long.json")]
    )  # fmt: skip
    (res,) = got["results"]
    buckets = res["buckets"]
    assert list(buckets) == [el.SHORT, f"{el.SENTENCE_WORDS} Zipf words"]
    for row in buckets.values():
        assert row["queries"] == 4
        for side in ("before", "after"):
            assert 0 < row[side]["p50"] <= row[side]["p99"]
        assert row["ratio_p50"] > 0
    assert res["answers"] == {"compared": 16, "same ids": 16, "same snippets": 16,
                              "same total": 16}  # fmt: skip
    text = out.read_text()
    assert text.startswith("$ python -m bench.embedded_long --against")
    assert "load average before:" in text and "load average after:" in text
    assert json.loads((tmp_path / "long.json").read_text())["sides"]["before"] == str(el.ROOT)
    # --cold: a new store generation before each of the 2 x 8 x 2 searches (after 1 load).
    with sqlite3.connect(tmp_path / "bench-300-seed7.db") as conn:
        gen = conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0]
    assert int(gen) == 1 + 2 * 8 * 2

    # The workers answered the query they were sent: the same ids as an in-process search.
    w = el.synthetic_workload(300, 7, tmp_path, 4)
    vectors = dict(zip(w.texts, w.vectors, strict=True))

    class Lookup:
        name, dimension = "bench-lookup", 384

        def embed_query(self, text: str) -> np.ndarray:
            return vectors[text]

    runs = el.run_ab(w, {"after": el.ROOT}, 1, 3, tmp_path)["after"]
    backend = EmbeddedBackend(w.db, 384)
    settings = Settings(backend="embedded", embedded_path=w.db, meaning_floor=-1.0)
    searcher = Searcher(backend, Lookup(), settings)  # type: ignore[arg-type]
    try:
        for r in runs:
            resp = searcher.search(Principal(w.principal, w.workspace),
                                   SearchRequest(query=w.texts[r["i"]], limit=10))  # fmt: skip
            assert r["ids"] == [x.id for x in resp.results]
        assert any(r["ids"] for r in runs)
    finally:
        backend.close()
