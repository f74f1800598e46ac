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
