"""The pieces that keep embedded highlights linear in a capped text (issue 14.2).

Huge bodies from a tiny vocabulary make every word a hit thousands of times: FTS5's
snippet() scores a window per hit (quadratic in hits) inside one SQLite step, which the
progress handler cannot interrupt. The end-to-end rule (search and related stop at the
deadline, on both backends) is tests/contract/rules_bounded.py.
"""

from __future__ import annotations

import pytest

from suli.backends import embedded_sql

pytestmark = pytest.mark.unit


def test_best_window_is_linear_centred_and_balances_marks() -> None:
    o, c = embedded_sql.MARK_OPEN, embedded_sql.MARK_CLOSE
    words = [f"w{i}" for i in range(100)]
    words[50], words[52] = f"{o}kite{c}", f"{o}string{c}"
    got = embedded_sql.best_window(" ".join(words), size=7)
    assert got == f"…w48 w49 {o}kite{c} w51 {o}string{c} w53 w54…"
    # A mark that spans chunks is closed and reopened at the window's edges.
    spanning = " ".join(["a"] * 10 + [f"{o}x", "y", f"z{c}"] + ["b"] * 10)
    got = embedded_sql.best_window(spanning, size=2)
    assert got.count(o) == got.count(c) == 1
    # Short text: whole, no ellipsis unless the text was capped.
    assert embedded_sql.best_window(f"one {o}two{c}") == f"one {o}two{c}"
    assert embedded_sql.best_window(f"one {o}two{c}", capped=True).endswith("…")


def test_cap_text_cuts_at_whitespace() -> None:
    assert embedded_sql.cap_text("abc def ghi", 9) == "abc def"
    assert embedded_sql.cap_text("short", 9) == "short"
    assert len(embedded_sql.cap_text("x" * 50, 9)) == 9
