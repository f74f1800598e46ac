"""Typo tolerance on the embedded store (DESIGN 3.12): corrections from the FTS5 vocabulary.

A query word that may carry a typo (suli.text.typo_words) is compared, with rapidfuzz's
optimal-string-alignment distance (a swap is one edit, as in Lucene's fuzzy query), against
the words of the unstemmed FTS table that share its first letter and are about as long; the
last word also matches as a prefix (`"word"*`). The corrections then join the text leg's
MATCH, which runs under the caller's visibility, weighed by suli.text.TYPO_WEIGHT (see
ItemStore._scored).

The vocabulary spans every workspace, so it is never shown and is read only here: a
correction is kept only when it occurs in an item the caller can see (checked by a MATCH under
the visibility rule, before any cap), so another tenant's words neither enter the query nor
crowd a visible correction out of the MAX_EXPANSIONS kept; the candidates are ranked by
distance, then alphabetically, never by a document frequency that invisible items would share in.

Reading a first letter's words from the vocabulary walks every posting of them (fts5vocab
counts documents as it goes): about 2 ms a letter at 3,600 documents and 30 at 100,000, so a
word's corrections cost more than its whole exact match. So every write transaction keeps the
distinct words in a table of their own (embedded_sql.TERMS_TABLE, a seek per letter): each
connection logs the text its writes add and remove (temporary triggers beside the FTS ones,
into temporary FTS5 tables with the same tokenizer), and `sync_terms` applies the difference
before the commit. A `Vocabulary` keeps, for one generation of the store (whose every write
makes a new one), the words of each letter read so far and each word's corrections per caller:
the same answers, read once.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from typing import Any

from rapidfuzz import process
from rapidfuzz.distance import OSA

from suli.backends.base import TextFields
from suli.backends.embedded.sql import (
    FTS_COLUMNS,
    FTS_TABLES,
    TERMS_TABLE,
    TOKENIZERS,
    match_expression,
    quote_word,
    where,
)
from suli.lru import Lru
from suli.models import Filters
from suli.text import (
    ENGLISH_STOPWORDS,
    MAX_EXPANSIONS,
    PREFIX_LENGTH,
    max_edits,
    prefix_word,
    similarity,
    typo_words,
)
from suli.visibility import Visibility

VOCAB_TABLE = "suli_vocab"  # a per-connection fts5vocab over fts_plain: every workspace's words
CHECK_CHUNK = 64  # correction candidates checked for visibility in one query (see corrections)
_TERM_END = "\U0010ffff"  # sorts after every term with the same head
CORRECTIONS_KEPT = 4_096  # (caller, word) pairs per generation


# A connection's log of the text its writes put into and took out of the unstemmed table.
ADDED, REMOVED = "suli_terms_added", "suli_terms_removed"


def vocab_schema() -> list[str]:
    """DDL of a connection's vocabulary view and its write log (temporary: nothing is added
    to the file). The log's triggers (log_triggers) mirror the FTS tables' (embedded_sql.schema):
    the same rows, so the same words, go in and out."""
    ddl = [
        f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{VOCAB_TABLE} "
        f"USING fts5vocab(main, {FTS_TABLES['plain']}, 'row')"
    ]
    for log in (ADDED, REMOVED):
        ddl += [
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{log} USING fts5(text, content='', "
            f"tokenize='{TOKENIZERS['plain']}')",
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{log}_vocab USING fts5vocab(temp, {log}, 'row')",
        ]
    return ddl


def log_triggers() -> list[str]:
    """DDL of a connection's triggers that fill its write log (on `items`: once it exists)."""
    text = " || char(10) || ".join(f"{{row}}.{c}" for c in FTS_COLUMNS)
    add = f"INSERT INTO {ADDED}(text) VALUES ({text.format(row='new')});"
    remove = f"INSERT INTO {REMOVED}(text) VALUES ({text.format(row='old')});"
    cols = ", ".join(FTS_COLUMNS)
    # An unchanged text moves no count: a re-index of the same items logs nothing.
    changed = " OR ".join(f"old.{c} IS NOT new.{c}" for c in FTS_COLUMNS)
    return [
        f"CREATE TEMP TRIGGER IF NOT EXISTS {ADDED}_ai AFTER INSERT ON main.items BEGIN {add} END",
        f"CREATE TEMP TRIGGER IF NOT EXISTS {REMOVED}_ad AFTER DELETE ON main.items "
        f"BEGIN {remove} END",
        f"CREATE TEMP TRIGGER IF NOT EXISTS {ADDED}_au AFTER UPDATE OF {cols} ON main.items "
        f"WHEN {changed} BEGIN {remove} {add} END",
    ]


def sync_terms(c: sqlite3.Connection) -> None:
    """Apply this write transaction's log to the words table (before its commit): each word's
    document count moves by the documents that added it less those that removed it, exactly
    as in the FTS table (the log's triggers mirror its), and a word at 0 goes."""
    counts = dict(c.execute(f"SELECT term, doc FROM temp.{ADDED}_vocab").fetchall())
    if not counts and c.execute(f"SELECT 1 FROM temp.{REMOVED}_vocab LIMIT 1").fetchone() is None:
        return
    for term, n in c.execute(f"SELECT term, doc FROM temp.{REMOVED}_vocab").fetchall():
        counts[term] = counts.get(term, 0) - n
    c.executemany(
        f"INSERT INTO {TERMS_TABLE} VALUES (?, ?) "
        "ON CONFLICT (term) DO UPDATE SET docs = docs + excluded.docs",
        [(t, n) for t, n in counts.items() if n],
    )
    c.executemany(
        f"DELETE FROM {TERMS_TABLE} WHERE term = ? AND docs <= 0",
        [(t,) for t, n in counts.items() if n < 0],
    )
    for log in (ADDED, REMOVED):
        c.execute(f"INSERT INTO temp.{log}({log}) VALUES ('delete-all')")


def rebuild_terms(c: sqlite3.Connection) -> bool:
    """Fill the words table from the vocabulary (one walk of every posting) when it is not
    current, as on a file written without it; True if it was rebuilt. In a write transaction."""
    meta = dict(c.execute("SELECT key, value FROM meta WHERE key LIKE '%generation'").fetchall())
    if meta.get("terms_generation") == meta["generation"]:
        return False
    c.execute(f"DELETE FROM {TERMS_TABLE}")
    c.execute(f"INSERT INTO {TERMS_TABLE} SELECT term, doc FROM temp.{VOCAB_TABLE}")
    c.execute("INSERT OR REPLACE INTO meta VALUES ('terms_generation', ?)", (meta["generation"],))
    for log in (ADDED, REMOVED):  # what the table now holds already
        c.execute(f"INSERT INTO temp.{log}({log}) VALUES ('delete-all')")
    return True


@dataclass(frozen=True, slots=True)
class TextMatch:
    """The FTS5 expressions of one text query: its exact words and its typo tier."""

    exact: str | None  # None: no word left to match exactly
    # The corrections, on the unstemmed table, as OpenSearch's fuzzy clause runs on unstemmed
    # fields: a typo is an edit of the word, not of its stem. None: none.
    typo: str | None
    # The last word's prefix, on the unstemmed table: the stemmer would cut a whole word to a
    # stem that is a prefix of others ("orchestrations" -> "orchestr" -> "orchestra").
    prefix: str | None = None
    # What the text leg scores the corrections by (EmbeddedBackend._scored): each corrected
    # word (quoted, matched on the query's table: its rows gain nothing from its corrections)
    # with its corrections grouped by similarity (Lucene's fuzzy boost, 1 - edits / length).
    corrected: tuple[tuple[str, tuple[tuple[float, str], ...]], ...] = ()

    def condition(self, flavour: TextFields) -> tuple[str, list[Any]]:
        """SQL over items `i`: the row matches in any tier (for counts and facets)."""
        ors: list[str] = []
        params: list[Any] = []
        for table, expr in self.tiers(flavour):
            ors.append(f"i.rowid IN (SELECT rowid FROM {table} WHERE {table} MATCH ?)")
            params.append(expr)
        return (f"({' OR '.join(ors)})" if ors else "0"), params

    def rows(self, flavour: TextFields) -> tuple[str, list[Any]] | None:
        """A SELECT of the rowids that match in any tier, each once; None: none can."""
        parts = [f"SELECT rowid FROM {t} WHERE {t} MATCH ?" for t, _ in self.tiers(flavour)]
        if not parts:
            return None
        return " UNION ".join(parts), [e for _, e in self.tiers(flavour)]

    def tiers(self, flavour: TextFields) -> list[tuple[str, str]]:
        """(FTS table, MATCH expression) of each tier a row may match in, as counts see them."""
        pairs = (
            (FTS_TABLES[flavour], self.exact),
            (FTS_TABLES["plain"], self.typo),
            (FTS_TABLES["plain"], self.prefix),
        )
        return [(table, expr) for table, expr in pairs if expr is not None]


class Vocabulary:
    """The unstemmed words by first letters and length, and corrections by (visibility,
    word), for one generation of the store; shared by its threads."""

    def __init__(self, generation: int | None = None) -> None:
        """`generation`: the store's, whose words table is read if current (else, and with
        None, the FTS5 vocabulary)."""
        self._lock = threading.Lock()
        self._generation = generation
        self._source: str | None = None
        self._heads: dict[str, dict[int, list[str]]] = {}
        self._corrections: Lru[list[str]] = Lru(CORRECTIONS_KEPT)

    def _table(self, c: sqlite3.Connection) -> str:
        """The words table if it is current for this generation, else the FTS5 vocabulary."""
        if self._source is None:
            row = c.execute("SELECT value FROM meta WHERE key = 'terms_generation'").fetchone()
            current = row is not None and row[0] == str(self._generation)
            self._source = TERMS_TABLE if current else f"temp.{VOCAB_TABLE}"
        return self._source

    def terms(self, c: sqlite3.Connection, head: str, shortest: int, longest: int) -> list[str]:
        """The words starting with `head` of `shortest` to `longest` characters."""
        with self._lock:
            got = self._heads.get(head)
        if got is None:
            got = {}
            for (term,) in c.execute(
                f"SELECT term FROM {self._table(c)} WHERE term >= ? AND term < ?",
                (head, head + _TERM_END),
            ):
                got.setdefault(len(term), []).append(term)
            with self._lock:
                self._heads[head] = got
        return [t for n in range(shortest, longest + 1) for t in got.get(n, ())]

    def corrections(self, c: sqlite3.Connection, vis: Visibility, word: str) -> list[str]:
        """corrections(c, vis, word), found once."""
        with self._lock:
            got = self._corrections.get((vis, word))
        if got is None:
            got = corrections(c, vis, word, self)
            with self._lock:
                self._corrections.put((vis, word), got)
        return got


def _visible(c: sqlite3.Connection, terms: list[str], sql: str, params: list[Any]) -> bool:
    """Whether an item the caller may see holds any of `terms`."""
    table = FTS_TABLES["plain"]
    # The terms' rows drive (by rowid), not a scan of the caller's visible items.
    row = c.execute(
        f"SELECT 1 FROM items i WHERE i.rowid IN (SELECT rowid FROM {table} WHERE {table} "
        f"MATCH ?) AND {sql} LIMIT 1",
        [" OR ".join(quote_word(t) for t in terms), *params],
    ).fetchone()
    return row is not None


def corrections(
    c: sqlite3.Connection, vis: Visibility, word: str, vocab: Vocabulary | None = None
) -> list[str]:
    """Words of items `vis` may see within max_edits(word) of `word` (not itself), nearest
    first, at most MAX_EXPANSIONS. `vocab`: the generation's words, if read already."""
    k = max_edits(word)
    head = word[:PREFIX_LENGTH]
    if vocab is not None:
        terms = vocab.terms(c, head, len(word) - k, len(word) + k)
    else:
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
    # Every candidate may be checked: a cap on the checks (there was one, at 60) counts the
    # invisible ones too, so a crowd of near-misses nobody may see pushed a visible word out
    # and told the caller whether that crowd exists (#33). The cap is on visible words only.
    # Candidates go in chunks, one query each, and only a chunk that holds a visible word is
    # checked word by word: a crowd costs one query per CHECK_CHUNK of it (11,000 planted
    # near-misses: 0.9 s one by one), the visible words at most MAX_EXPANSIONS chunks.
    terms = [t for _, t in ranked]
    for start in range(0, len(terms), CHECK_CHUNK):
        chunk = terms[start : start + CHECK_CHUNK]
        if not _visible(c, chunk, sql, params):
            continue
        for term in chunk:
            if _visible(c, [term], sql, params):
                out.append(term)
                if len(out) == MAX_EXPANSIONS:
                    return out
    return out


def text_match(
    c: sqlite3.Connection,
    vis: Visibility,
    text: str,
    flavour: TextFields,
    vocab: Vocabulary | None = None,
) -> TextMatch:
    """The exact expression of `text` and its typo tier, under `vis`'s vocabulary (`vocab`:
    the store generation's, which keeps what it read)."""
    exact = match_expression(text, flavour)
    if flavour == "plain":  # only common words: they are never corrected
        return TextMatch(exact, None)
    typo: list[str] = []
    corrected: list[tuple[str, tuple[tuple[float, str], ...]]] = []
    for w in typo_words(text):
        found = corrections(c, vis, w) if vocab is None else vocab.corrections(c, vis, w)
        typo += [quote_word(t) for t in found]
        groups: dict[float, list[str]] = {}
        for t in found:
            groups.setdefault(round(similarity(w, t), 6), []).append(quote_word(t))
        if groups:
            corrected.append((quote_word(w), tuple((k, " OR ".join(v)) for k, v in groups.items())))
    last = prefix_word(text)
    unique = list(dict.fromkeys(typo))
    return TextMatch(
        exact,
        " OR ".join(unique) if unique else None,
        f"{quote_word(last)}*" if last is not None else None,
        tuple(corrected),
    )
