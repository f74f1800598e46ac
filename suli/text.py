"""Query text analysis shared by every backend: words, and the common-word rule (DESIGN 3.5)."""

from __future__ import annotations

import re

# Lucene's English stop set (the `_english_` list of OpenSearch's english analyzer), so
# Python and the index agree on what a common word is.
ENGLISH_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)

_WORD = re.compile(r"\w+", re.UNICODE)


def words(text: str) -> list[str]:
    """Lower-cased word tokens of text (punctuation and query syntax are just separators)."""
    return [w.lower() for w in _WORD.findall(text)]


def only_common_words(text: str) -> bool:
    """True when the query has words and every one of them is a common (stop) word."""
    ws = words(text)
    return bool(ws) and all(w in ENGLISH_STOPWORDS for w in ws)


# BM25 field weights shared by both backends. Tuned on NFCorpus dev qrels (bench/quality.py):
# a title boost of 3 cost 0.03 nDCG@10 there; 1.25 keeps titles ahead at almost no cost.
FIELD_WEIGHTS = {"title": 1.25, "body": 1.0, "caption": 1.0, "path": 1.0, "tags": 2.0}


# ---- typos (DESIGN 3.12) -------------------------------------------------------------------
# A word of at least FUZZY_MIN_CHARS letters may carry a typo: one edit from five letters,
# two from TWO_EDITS_CHARS (OpenSearch's `fuzziness: AUTO:5,8`). Lucene's plain AUTO (two
# edits from six letters) let made-up words find real ones ("brillig" -> "billing", "bowling" ->
# "billing" on the sample workspace: tests/integration/test_floor.py); one edit is what the
# common typo (a swap, a dropped, extra or wrong letter) needs. The first PREFIX_LENGTH
# letters must be right, as in most typos, which also keeps the expansion small. The last word
# may be half typed: it matches as a prefix from PREFIX_MIN_CHARS letters.
FUZZY_MIN_CHARS = 5
TWO_EDITS_CHARS = 8
PREFIX_LENGTH = 1
PREFIX_MIN_CHARS = 3
# A correction's weight against the word spelt right (DESIGN 3.12), on both backends: a word
# found through a correction counts as that word would (its own BM25: the rarer, the more),
# times this penalty for the edit, and only in items without the query's word itself, so an
# item holding the word spelt right ranks above one holding only a correction of it. Tuned on
# NFCorpus dev (bench/typos.py; bench/RESULTS.md "Typos in the rarest word").
TYPO_WEIGHT = 0.5
# Corrections kept per word on the embedded store (visible words only, nearest first).
MAX_EXPANSIONS = 20
# Words corrected per query, the first ones: typed queries are short, and a long one (a
# related card's 64 words, a 1,000-character query) must not cost a correction per word.
MAX_TYPO_WORDS = 8


def max_edits(word: str) -> int:
    """Edits a word may be away from what it means (0, 1, then 2; see FUZZY_MIN_CHARS)."""
    n = len(word)
    return 0 if n < FUZZY_MIN_CHARS else 1 if n < TWO_EDITS_CHARS else 2


def typo_words(text: str) -> list[str]:
    """The query words that may carry a typo: long enough and never a common word."""
    ws = [w for w in words(text) if w not in ENGLISH_STOPWORDS and max_edits(w)]
    return list(dict.fromkeys(ws))[:MAX_TYPO_WORDS]


def prefix_word(text: str) -> str | None:
    """The last word, matched as a prefix too (it may be half typed); None when it is a
    common word or too short to narrow anything."""
    ws = words(text)
    if not ws or ws[-1] in ENGLISH_STOPWORDS or len(ws[-1]) < PREFIX_MIN_CHARS:
        return None
    return ws[-1]


def similarity(word: str, correction: str) -> float:
    """A correction's weight against the word (Lucene's fuzzy boost, FuzzyTermsEnum): 1 -
    edits / the shorter length, a swap one edit; every backend weighs corrections by it."""
    from rapidfuzz.distance import OSA  # here: `suli --version` never loads it

    return 1.0 - OSA.distance(word, correction) / min(len(word), len(correction))
