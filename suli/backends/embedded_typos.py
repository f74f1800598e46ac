"""Typo tolerance on the embedded store (DESIGN 3.12): corrections from the FTS5 vocabulary.

A query word that may carry a typo (suli.text.typo_words) is compared, with rapidfuzz's
optimal-string-alignment distance (a swap is one edit, as in Lucene's fuzzy query), against
the words of the unstemmed FTS table that share its first letter and are about as long; the
last word also matches as a prefix (`"word"*`). The corrections then join the text leg's
MATCH, which runs under the caller's visibility, in a lower tier (see EmbeddedBackend).

The vocabulary spans every workspace, so it is never shown and is read only here: a
correction is kept only when it occurs in an item the caller can see (checked by a MATCH under
the visibility rule), so another tenant's words neither enter the query nor crowd a visible
correction out of the MAX_EXPANSIONS kept; the candidates are ranked by distance, then
alphabetically, never by a document frequency that invisible items would share in.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from rapidfuzz import process
from rapidfuzz.distance import OSA

from suli.backends.base import TextFields
from suli.backends.embedded_sql import FTS_TABLES, match_expression, quote_word, where
from suli.models import Filters
from suli.text import (
    ENGLISH_STOPWORDS,
    MAX_EXPANSIONS,
    PREFIX_LENGTH,
    max_edits,
    prefix_word,
    typo_words,
)
from suli.visibility import Visibility

VOCAB_TABLE = "suli_vocab"  # a per-connection fts5vocab over fts_plain: every workspace's words
# Candidates checked for visibility per word, nearest first: bounded work however many
# near-misses the vocabulary holds.
MAX_CHECKS = 3 * MAX_EXPANSIONS
_TERM_END = "\U0010ffff"  # sorts after every term with the same head


def vocab_schema() -> list[str]:
    """DDL of a connection's vocabulary view (temporary: nothing is added to the file)."""
    return [
        f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{VOCAB_TABLE} "
        f"USING fts5vocab(main, {FTS_TABLES['plain']}, 'row')"
    ]


@dataclass(frozen=True, slots=True)
class TextMatch:
    """The FTS5 expressions of one text query: its exact words and its typo tier."""

    exact: str | None  # None: no word left to match exactly
    typo: str | None  # corrections, on the same (stemmed) table; None: none
    # The last word's prefix, on the unstemmed table: the stemmer would cut a whole word to a
    # stem that is a prefix of others ("orchestrations" -> "orchestr" -> "orchestra").
    prefix: str | None = None

    @property
    def either(self) -> str | None:
        """The exact words or a correction (one table: for the first tiers and highlights)."""
        parts = [p for p in (self.exact, self.typo) if p]
        if len(parts) < 2:
            return parts[0] if parts else None
        return f"({parts[0]}) OR ({parts[1]})"

    @property
    def typo_only(self) -> str | None:
        """Rows of the corrections tier that no exact word matches."""
        if self.typo is None:
            return None
        return self.typo if self.exact is None else f"({self.typo}) NOT ({self.exact})"

    def condition(self, flavour: TextFields) -> tuple[str, list[Any]]:
        """SQL over items `i`: the row matches in any tier (for counts and facets)."""
        ors: list[str] = []
        params: list[Any] = []
        for table, expr in ((FTS_TABLES[flavour], self.either), (FTS_TABLES["plain"], self.prefix)):
            if expr is not None:
                ors.append(f"i.rowid IN (SELECT rowid FROM {table} WHERE {table} MATCH ?)")
                params.append(expr)
        return (f"({' OR '.join(ors)})" if ors else "0"), params


def _visible(c: sqlite3.Connection, term: str, sql: str, params: list[Any]) -> bool:
    table = FTS_TABLES["plain"]
    # The term's rows drive (by rowid), not a scan of the caller's visible items.
    row = c.execute(
        f"SELECT 1 FROM items i WHERE i.rowid IN (SELECT rowid FROM {table} WHERE {table} "
        f"MATCH ?) AND {sql} LIMIT 1",
        [quote_word(term), *params],
    ).fetchone()
    return row is not None


def corrections(c: sqlite3.Connection, vis: Visibility, word: str) -> list[str]:
    """Words of items `vis` may see within max_edits(word) of `word` (not itself), nearest
    first, at most MAX_EXPANSIONS."""
    k = max_edits(word)
    head = word[:PREFIX_LENGTH]
    terms = [
        r[0]
        for r in c.execute(
            f"SELECT term FROM temp.{VOCAB_TABLE} WHERE term >= ? AND term < ? "
            "AND length(term) BETWEEN ? AND ?",
            (head, head + _TERM_END, len(word) - k, len(word) + k),
        )
    ]
    near = process.extract(word, terms, scorer=OSA.distance, score_cutoff=k, limit=None)
    # Never a common word: it would make one count as a match (DESIGN 3.5).
    ranked = sorted((int(d), t) for t, d, _ in near if d > 0 and t not in ENGLISH_STOPWORDS)
    # Hidden items count: the caller may ask for them, so their words are not secret.
    sql, params = where(vis, Filters(), hidden_ok=True)
    out: list[str] = []
    for _, term in ranked[:MAX_CHECKS]:
        if _visible(c, term, sql, params):
            out.append(term)
            if len(out) == MAX_EXPANSIONS:
                break
    return out


def text_match(c: sqlite3.Connection, vis: Visibility, text: str, flavour: TextFields) -> TextMatch:
    """The exact expression of `text` and its typo tier, under `vis`'s vocabulary."""
    exact = match_expression(text, flavour)
    if flavour == "plain":  # only common words: they are never corrected
        return TextMatch(exact, None)
    typo: list[str] = []
    for w in typo_words(text):
        typo += [quote_word(t) for t in corrections(c, vis, w)]
    last = prefix_word(text)
    unique = list(dict.fromkeys(typo))
    return TextMatch(
        exact,
        " OR ".join(unique) if unique else None,
        f"{quote_word(last)}*" if last is not None else None,
    )
