"""Snippets: the highlighted fragment for word matches, the best passage for meaning-only ones."""

from __future__ import annotations

import html
import re

from suli.text import ENGLISH_STOPWORDS, words

PASSAGE_WORDS = 40
SNIPPET_CHARS = 240
# Passages are looked for in this many leading characters only: the work of a snippet stays
# bounded however large a body is (a huge body must not make a search slow), as the
# embedded highlights are.
PASSAGE_SCAN_CHARS = 10_000
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n{2,}")


def passages(text: str, size: int = PASSAGE_WORDS) -> list[str]:
    """Split text into passages of about `size` words along sentence ends."""
    out: list[str] = []
    cur: list[str] = []
    for sentence in _SENTENCE.split(text):
        toks = sentence.split()
        if not toks:
            continue
        if cur and len(cur) + len(toks) > size:
            out.append(" ".join(cur))
            cur = []
        cur.extend(toks)
        while len(cur) > size * 2:  # one huge sentence: cut it
            out.append(" ".join(cur[:size]))
            cur = cur[size:]
    if cur:
        out.append(" ".join(cur))
    return out


def _stem(w: str) -> str:
    return w[:5]  # a crude shared prefix is enough to pick a passage, not to rank documents


def best_passage(text: str, query: str) -> str:
    """The passage sharing the most query words (by prefix); the first one when none does."""
    ps = passages(text[:PASSAGE_SCAN_CHARS])
    if not ps:
        return ""
    q = {_stem(w) for w in words(query) if w not in ENGLISH_STOPWORDS}
    best, best_score = ps[0], 0
    for p in ps:
        score = len(q.intersection(_stem(w) for w in words(p)))
        if score > best_score:
            best, best_score = p, score
    return clip(best)


def clip(text: str, limit: int = SNIPPET_CHARS) -> str:
    """Plain text cut at a word boundary and HTML-escaped (snippets are HTML-safe)."""
    # Whitespace runs shrink when joined: a prefix of 16x the limit is plenty for one clip.
    text = " ".join(text[: limit * 16].split())
    if len(text) > limit:
        text = text[:limit].rsplit(" ", 1)[0] + " …"
    return html.escape(text, quote=False)
