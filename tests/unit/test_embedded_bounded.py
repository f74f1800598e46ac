"""The pieces that keep embedded highlights linear in a capped text (issue 14.2).

Huge bodies from a tiny vocabulary make every word a hit thousands of times: FTS5's
snippet() scores a window per hit (quadratic in hits) inside one SQLite step, which the
progress handler cannot interrupt. The end-to-end rule (search and related stop at the
deadline, on both backends) is tests/contract/rules_bounded.py.
"""

from __future__ import annotations

from suli.backends import embedded_sql


def test_best_window_centres_the_most_distinct_hits_on_whole_words() -> None:
    o, c = embedded_sql.MARK_OPEN, embedded_sql.MARK_CLOSE
    words = [f"w{i:02d}" for i in range(100)]
    words[10] = f"{o}kite{c}"  # one hit alone early, two distinct ones later
    words[50], words[52] = f"{o}kite{c}", f"{o}string{c}"
    got = embedded_sql.best_window(" ".join(words), size=30)
    assert got.startswith("…") and got.endswith("…")
    assert f"{o}kite{c} w51 {o}string{c}" in got
    assert all(len(w) == 3 or o in w or w.startswith("…") or w.endswith("…")
               for w in got.split())  # fmt: skip
    assert len(got) < 60


def test_best_window_balances_marks_cut_by_the_window() -> None:
    o, c = embedded_sql.MARK_OPEN, embedded_sql.MARK_CLOSE
    spanning = " ".join(["a"] * 40 + [f"{o}x", "y" * 30, f"z{c}"] + ["b"] * 40)
    got = embedded_sql.best_window(spanning, size=10)
    assert got.count(o) == got.count(c) == 1 and got.index(o) < got.index(c)


def test_best_window_keeps_short_text_whole_and_scans_a_bounded_prefix() -> None:
    o, c = embedded_sql.MARK_OPEN, embedded_sql.MARK_CLOSE
    assert embedded_sql.best_window(f"one {o}two{c}") == f"one {o}two{c}"
    # A hit past the scanned prefix is not looked for: the fragment is the text's start.
    late = "word " * 5000 + f"{o}kite{c}"
    got = embedded_sql.best_window(late, scan=1000)
    assert o not in got and got.startswith("word") and got.endswith("…")


def test_cap_text_cuts_at_whitespace() -> None:
    assert embedded_sql.cap_text("abc def ghi", 9) == "abc def"
    assert embedded_sql.cap_text("short", 9) == "short"
    assert len(embedded_sql.cap_text("x" * 50, 9)) == 9
