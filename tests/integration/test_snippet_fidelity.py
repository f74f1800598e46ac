"""The core's snippets against the engine: the words suli.snippets marks are the words
OpenSearch's unified highlighter marks under today's page highlight request, on NFCorpus
test queries and a one-typo copy of each (bench/snippet_fidelity.py runs the full set)."""

from __future__ import annotations

import json
import random

import pytest
from opensearchpy import OpenSearch

from bench import nfcorpus
from bench import snippet_fidelity as fidelity
from bench import snippets as speed

QUERIES = 30  # test queries, each with a one-typo copy


@pytest.fixture
def sample_index(os_client: OpenSearch, index_name: str) -> str:
    """The judged documents of the first QUERIES test queries and the corpus's first 300,
    in an index with the items mapping's text analysis."""
    qrels = nfcorpus.load_qrels("test")
    queries = nfcorpus.load_queries(set(qrels))
    wanted = {d for q in sorted(queries)[:QUERIES] for d in qrels[q]}
    docs = fidelity.documents(None)
    sample = docs[:300] + [d for d in docs[300:] if d["id"] in wanted]
    fidelity.create_index(os_client, index_name)
    fidelity.load(os_client, index_name, sample)
    return index_name


def test_core_marks_the_words_the_engine_highlighter_marks(
    os_client: OpenSearch, sample_index: str
) -> None:
    queries = fidelity.queries_with_typos(QUERIES)
    assert len(queries) > 1.5 * QUERIES  # most queries have a word a typo can go in
    report = fidelity.run(os_client, sample_index, queries)
    assert report.hits >= 150
    shown = json.dumps(report.differences[:10], ensure_ascii=False, indent=1)
    assert report.figure >= 0.99, f"{report.figure:.4f} {dict(report.causes)}\n{shown}"


def test_typo_copies_keep_the_first_letter_and_change_one_word() -> None:
    rng = random.Random(1)
    for q in fidelity.test_queries(20):
        typo = fidelity.typo_copy(q, rng)
        if typo is None:
            continue
        before, after = q.split(), typo.split()
        changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
        assert len(changed) == 1 and changed[0][0][0] == changed[0][1][0]


def test_fidelity_bench_runs_end_to_end(
    opensearch_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert fidelity.main(["--url", opensearch_url, "--docs", "200", "--queries", "5"]) == 0
    out = capsys.readouterr().out
    assert "fidelity" in out and "text hits" in out
    assert not OpenSearch(opensearch_url).indices.get(index="suli-snippet-fidelity-*")


def test_speed_bench_reports_pages_and_the_huge_body() -> None:
    got = speed.run(n_queries=5, repeat=1)
    assert got["nfcorpus"]["pages"] >= 1 and got["nfcorpus"]["p50_ms"] > 0
    assert got["huge"]["far"]["p50_ms"] > 0 and got["huge"]["near"]["p50_ms"] > 0
    assert got["huge_body_chars"] == 1_000_000
