"""`python -m bench.quality --tune` stays honest: it refuses the test split, tunes on dev only,
writes its grid and choice before it reads test, and covers both backends (a tiny slice)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from bench import nfcorpus, quality, tuning


def test_tuning_on_test_is_refused_before_anything_happens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        quality.main(["--tune", "--tune-split", "test", "--out", str(tmp_path / "out")])
    assert e.value.code == 2
    assert "dev split only, not 'test'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    with pytest.raises(tuning.TestSplitRefused):
        tuning.tune([], None, quality.Settings(), split="test")  # type: ignore[arg-type]


def test_tune_writes_grid_and_choice_before_reading_test(
    opensearch_url: str,
    make_index_name: Callable[[], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SULI_OPENSEARCH_URL", opensearch_url)
    monkeypatch.setattr(quality, "CACHE", tmp_path / "vectors.sqlite")
    out = tmp_path / "results"
    reads: list[tuple[str, bool]] = []  # (split, was the choice already written?)
    real = nfcorpus.load_qrels

    def spy(split: str) -> dict[str, dict[str, int]]:
        grid = out / "tuning-grid.json"
        reads.append((split, grid.exists() and "chosen" in json.loads(grid.read_text())))
        return real(split)

    monkeypatch.setattr(tuning, "load_qrels", spy)
    # Two values a parameter keep it to seconds: each k1/b value closes and reopens the index.
    forms = tuning.OPENSEARCH_TEXT_GRID["form"]
    monkeypatch.setattr(
        tuning,
        "OPENSEARCH_TEXT_GRID",
        {"form": (forms[0], forms[-1]), "bm25": ((0.9, 0.4), (1.2, 0.75)), "ef_search": (100, 400)},
    )
    monkeypatch.setattr(tuning, "FUSION_GRID", {n: v[:2] for n, v in tuning.FUSION_GRID.items()})
    alias = make_index_name()
    report = quality.main(
        ["--tune", "--embedder", "fake", "--limit-docs", "30", "--limit-queries", "3",
         "--alias", alias, "--db", str(tmp_path / "bench.db"), "--out", str(out)]
    )  # fmt: skip
    assert reads == [("dev", False), ("test", True)]
    grid = json.loads((out / "tuning-grid.json").read_text())
    assert grid["tuned_on"] == "dev"
    assert set(grid["chosen"]) == {"fusion", "opensearch", "embedded"}
    assert set(grid["grids"]["fusion"]) >= {"rrf_k", "vector_weight", "candidate_depth"}
    assert set(grid["grids"]["fusion"]) >= {"meaning_margin"}
    # Every value of every text parameter was tried at least once.
    tried = {json.dumps(t["form"], sort_keys=True) for t in grid["trials"]["opensearch"]}
    assert tried >= {json.dumps(f, sort_keys=True) for f in grid["grids"]["opensearch"]["form"]}
    assert len(grid["grids"]["opensearch"]["form"]) == len(tuning.OPENSEARCH_TEXT_GRID["form"])
    # The k-NN candidates are tuned too: every value tried, each trial with its vector leg.
    assert {t["ef_search"] for t in grid["trials"]["opensearch"]} >= {100, 400}
    assert all("vector_ndcg@10" in t for t in grid["trials"]["opensearch"])
    # The meaning floor is held (bench.floor calibrates it) and swept for the record.
    assert grid["chosen"]["fusion"]["meaning_floor"] == quality.Settings().meaning_floor
    assert any(t.get("sweep") == "meaning_floor" for t in grid["trials"]["fusion"])
    assert {"baseline", "chosen"} <= set(grid["test"]["embedded"])
    assert "top10_overlap" in grid["test"]
    summary = json.loads((out / "tuning.json").read_text())
    assert summary["chosen"] == report["chosen"] == grid["chosen"]
