"""bench/startup.py runs end to end and writes its report (a smoke test with one run each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import startup


def test_the_startup_bench_reports_every_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCH_EMBEDDER", "fake")  # the report's figures need the real model
    out = tmp_path / "startup.txt"
    startup.main(["--runs", "1", "--out", str(out)])
    report = out.read_text()
    for name in ("python -c pass", "suli --version", "suli search"):
        assert f"\n{name:<15} median " in report, name
    assert "goal <= 0.15 s" in report and "goal <= 0.5 s" in report
    assert "load average before" in report and "cores" in report and "cpu (user+sys)" in report
    # A warm search imports none of the heavy stack: not the model's runtime, not httpx.
    sections = report.split("top imports of ")
    search = next(s for s in sections if s.startswith("suli search"))
    assert "heavy packages imported: none" in search
    assert "suli.core" in search  # the import list is real, not empty
