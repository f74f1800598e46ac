"""bench/RESULTS.md opens with the table bench.results_table computes from the raw files."""

from __future__ import annotations

from bench import results_table as rt


def test_results_md_holds_the_generated_table() -> None:
    """Fails when a raw file or the script changed and the table was not regenerated, or the
    table was edited by hand: run `python -m bench.results_table --write`."""
    assert rt.current_block(rt.RESULTS_MD.read_text()) == rt.block()


def test_a_figure_edited_by_hand_is_caught() -> None:
    md = rt.RESULTS_MD.read_text()
    edited = md.replace("| ≤ 0.85×: met |", "| ≤ 0.85×: **missed** |", 1)
    assert edited != md and rt.current_block(edited) != rt.block()


def test_each_measure_once_and_every_raw_file_exists() -> None:
    names = [row.what for row in rt.ROWS]
    assert len(names) == len(set(names)) >= 20
    for row in rt.ROWS:
        assert row.files and all((rt.RESULTS / f).is_file() for f in row.files), row.what


def test_the_table_opens_the_results() -> None:
    md = rt.RESULTS_MD.read_text()
    assert md.index(rt.BEGIN) < md.index("\n---\n")  # above the line: history is below it
    assert md.count(rt.BEGIN) == md.count(rt.END) == 1
