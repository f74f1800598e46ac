"""Snippets, made in the core for every backend from the item's own text: the fragment with
the query's words marked for a word match, the best passage for a meaning-only one.

The words are marked as OpenSearch's unified highlighter marks them under the text leg's
query (suli.backends.opensearch.bodies.text_match, `require_field_match: false`): a token of
the item's title, body or caption is marked when its term (suli.analysis) is

  - one of the query's terms: the `english` terms of the query (the `suli_plain` ones for a
    query of only common words, DESIGN 3.5), or its `suli_path` terms (the exact clause also
    names the path field, and the highlighter takes a term from any field);
  - within the typo clause's edits of a typo word (suli.text.typo_words and max_edits: one
    edit from five letters, two from eight, the first letter fixed, a swap one edit: optimal
    string alignment, as Lucene's FuzzyQuery with transpositions), or
  - begins with the last word (suli.text.prefix_word, the prefix clause).

A word is marked only where it stands in the item's own text, so no correction reaches a
word that only another (maybe invisible) item holds.
"""

from __future__ import annotations

import functools
import html
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from rapidfuzz.distance import OSA

from suli import analysis
from suli.models import Item
from suli.text import ENGLISH_STOPWORDS, max_edits, prefix_word, typo_words, words

PASSAGE_WORDS = 40
SNIPPET_CHARS = 240
# Passages are looked for in this many leading characters only: the work of a snippet stays
# bounded however large a body is (a huge body must not make a search slow), as the
# embedded highlights are.
PASSAGE_SCAN_CHARS = 10_000
# A fragment is the length of OpenSearch's `fragment_size` (bench.native_hybrid.highlight, the block the engine highlighted with) ...
FRAGMENT_CHARS = 160
# ... picked from this many leading characters of a field: a page's snippets cost the same
# whatever its bodies hold (a 1,000,000-character body is marked in its first 10,000). A word
# further in still matches and ranks; the snippet is then the best passage.
SCAN_CHARS = 10_000
# The fields a fragment is taken from, in the order tried: a body passage says more than the
# title the user already sees. Path and tags are searched but never shown as a snippet.
SNIPPET_FIELDS = ("body", "caption", "title")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n{2,}")
TextFieldsMode = Literal["stemmed", "plain"]
# Matchers (one per query and field set) kept, and each one's verdicts by word: a page's
# candidate words fit, and all of them together stay ~130,000 entries.
MATCHERS = 64
SEEN_MAX = 2_048


@dataclass(frozen=True, slots=True)
class Matcher:
    """What a query marks: see the module docstring."""

    stemmed: bool  # field tokens compared by their `english` term, else their `suli_plain` one
    terms: frozenset[str]
    fuzzy: tuple[tuple[str, int], ...]  # (word, edits allowed)
    prefix: str | None
    firsts: frozenset[str]  # every rule fixes the first letter: the others are never looked up
    starts: tuple[re.Pattern[str], re.Pattern[str]]  # where such tokens are (tokens_at)
    heads: tuple[str, ...]  # what a word must begin with to stem to a term or the prefix
    # Verdicts by token, kept while the matcher is (matcher() is cached): a page repeats words.
    seen: dict[str, bool] = field(default_factory=dict, compare=False, hash=False)


@functools.lru_cache(maxsize=MATCHERS)
def matcher(query: str, text_fields: TextFieldsMode) -> Matcher:
    """The text leg's words for `query` (its `q.text`, `q.text_fields`)."""
    stemmed = text_fields == "stemmed"
    toks = analysis.words(query)
    if stemmed:
        terms = {t for t in map(analysis.english_term, toks) if t}
    else:
        terms = {analysis.plain_term(t) for t in toks}
    # A path term can equal a field's term only if it is one token ("alcohol:" is not).
    terms.update(t for t in analysis.path_terms(query) if analysis.words(t) == [t])
    fuzzy: dict[str, int] = {}
    prefix: str | None = None
    if stemmed:  # the typo clauses (opensearch_bodies.typo_clauses): none for common words
        for word in typo_words(query):
            # The fuzzy clause names content.plain and path.plain: the word as each analyses it.
            for form in {analysis.plain_term(word), *analysis.path_terms(word)}:
                if max_edits(form):
                    fuzzy[form] = max_edits(form)
        prefix = prefix_word(query)
    terms.discard("")
    firsts = {t[0] for t in terms} | {w[0] for w in fuzzy} | ({prefix[0]} if prefix else set())
    return Matcher(
        stemmed,
        frozenset(terms),
        tuple(fuzzy.items()),
        prefix,
        frozenset(firsts),
        analysis.starts_pattern(firsts),
        tuple({t[:-1] for t in terms} | ({prefix[:-1]} if prefix else set())),
    )


def is_match(term: str, m: Matcher) -> bool:
    """Whether a field token's term is marked (its first letter is one of m.firsts)."""
    if term in m.terms or (m.prefix is not None and term.startswith(m.prefix)):
        return True
    for word, edits in m.fuzzy:
        # Lucene's FuzzyQuery with prefix_length 1: the first letter equal, the rest within
        # the edits (a transposition is one edit: optimal string alignment).
        if (
            term[0] == word[0]
            and abs(len(term) - len(word)) <= edits
            and OSA.distance(term[1:], word[1:], score_cutoff=edits) <= edits
        ):
            return True
    return False


def may_match(low: str, m: Matcher) -> bool:
    """False when a lower-cased word cannot stem to a marked term, told without stemming it
    (a cold stem costs ~15 us; most candidate words fail here). A Porter stem keeps the
    word's letters but its last: stem[:-1] is a prefix of the word (tests/unit/
    test_snippets.py holds this), so a word stemming to t begins with t[:-1], and one whose
    stem is within k edits of w has a prefix within k + 1 edits of w, of length len(w) - k - 1
    to len(w) + k - 1."""
    if low.startswith(m.heads):
        return True
    for word, edits in m.fuzzy:
        if low[0] != word[0]:
            continue
        for n in range(max(1, len(word) - edits - 1), min(len(low), len(word) + edits - 1) + 1):
            if OSA.distance(low[:n], word, score_cutoff=edits + 1) <= edits + 1:
                return True
    return False


def marks(text: str, m: Matcher) -> list[tuple[int, int]]:
    """The (start, end) offsets of the tokens of text the query marks."""
    out = []
    firsts, seen = m.firsts, m.seen
    if len(seen) > SEEN_MAX:
        seen.clear()
    # In the english terms, a token's first letter is its term's; plain terms fold accents.
    spans = analysis.tokens_at(text, m.starts) if m.stemmed and firsts else None
    for start, end in analysis.tokens(text) if spans is None else spans:
        token = text[start:end]
        hit = seen.get(token)
        if hit is None:
            hit = seen[token] = _marked(token, m)
        if hit:
            out.append((start, end))
    return out


def _marked(token: str, m: Matcher) -> bool:
    first = token[0]
    if first not in m.firsts:  # most tokens stop here, before any analysis
        low = first.lower()
        if low not in m.firsts and (low.isascii() or analysis.fold(low)[:1] not in m.firsts):
            return False
    if m.stemmed:
        low = analysis.lower(analysis.unpossessive(token))
        term = analysis.english_term(token) if low and may_match(low, m) else None
    else:
        term = analysis.plain_term(token)
    return is_match(term, m) if term else False


def snippet(
    fields: Mapping[str, str | None], query: str, text_fields: TextFieldsMode, word_hit: bool
) -> str:
    """The HTML-escaped snippet of one page item.

    fields       the item's text by field name: title, body, caption (others are ignored)
    query        the text leg's words (the search's query text)
    text_fields  which fields the text leg searched ("stemmed", or "plain" for a query of
                 only common words: LegQuery.text_fields)
    word_hit     whether the item is a text-leg hit; a meaning-only hit gets its best passage

    A word hit gets a fragment of about FRAGMENT_CHARS characters of its body (else caption,
    else title) with the matched words in <mark>; when none of the first SCAN_CHARS characters
    of those fields holds a marked word, its best passage."""
    if word_hit:
        m = matcher(query, text_fields)
        if m.firsts:
            for name in SNIPPET_FIELDS:
                text = fields.get(name) or ""
                scanned = cap_text(text, SCAN_CHARS)
                spans = marks(scanned, m)
                if spans:
                    return fragment(scanned, spans, more=len(scanned) < len(text))
    return best_passage(fields.get("body") or fields.get("caption") or "", query)


def item_snippet(item: Item, query: str, text_fields: TextFieldsMode, word_hit: bool) -> str:
    """snippet() of a page item: its title, body and caption (a binary's body is not text:
    never searched, never shown; DESIGN 1)."""
    return snippet(
        {"title": item.title, "body": "" if item.is_binary else item.body, "caption": item.caption},
        query,
        text_fields,
        word_hit,
    )


def cap_text(text: str, limit: int) -> str:
    """The first `limit` characters of text, cut back to a whitespace so no word is split."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    cut = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
    return head[:cut] if cut > 0 else head


def fragment(
    text: str, spans: list[tuple[int, int]], size: int = FRAGMENT_CHARS, more: bool = False
) -> str:
    """About `size` characters of text around the marked spans, as HTML: the window holding
    the most distinct marked words (then the most marks), centred, widened to whole words,
    with `…` where text was left out (`more`: text is itself a prefix of the field). The same
    choice as the embedded store's FTS5 fragments (embedded_sql.best_window)."""
    n = len(text)
    if n <= size:
        start, end = 0, n
    else:
        counts: Counter[str] = Counter()
        lo, best, best_score = 0, (0, 0), -1
        keys = [text[a:b].casefold() for a, b in spans]
        for hi, (_, close) in enumerate(spans):
            counts[keys[hi]] += 1
            while close - spans[lo][0] > size and lo < hi:  # keep the marks within `size`
                counts[keys[lo]] -= 1
                if not counts[keys[lo]]:
                    del counts[keys[lo]]
                lo += 1
            score = 1000 * len(counts) + hi - lo + 1
            if score > best_score:
                best, best_score = (lo, hi), score
        first, last = spans[best[0]][0], spans[best[1]][1]
        start = max(0, first - max(0, size - (last - first)) // 2)
        end = min(n, max(last, start + size))
        start = max(0, min(start, end - size))
        if start > 0:  # whole words only: back to the start of the word the window cuts
            start = max(text.rfind(" ", 0, start), text.rfind("\n", 0, start)) + 1
        if end < n:
            breaks = [k for k in (text.find(" ", end), text.find("\n", end)) if k >= 0]
            end = min(breaks) if breaks else n
    out = ["…"] if start > 0 else []
    pos = start
    for a, b in spans:
        if a < start or b > end:  # a token never holds a space: a span is wholly in or out
            continue
        out += [html.escape(text[pos:a], quote=False), "<mark>"]
        out += [html.escape(text[a:b], quote=False), "</mark>"]
        pos = b
    out.append(html.escape(text[pos:end], quote=False))
    body = "".join(out).strip()
    return body + ("…" if end < n or more else "")


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
