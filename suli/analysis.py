"""The index's text analysis in Python: the words OpenSearch's analyzers (mappings/items.json)
make of a text, with their character offsets, so the core can mark in an item's own text the
words a query matched (suli.snippets).

  tokens        Lucene's standard tokenizer (UAX#29 word breaks: "don't", "O'Reilly's", "3.14",
                "U.S.A" and "foo_bar" stay whole; "e-mail" is two words)
  english_term  the `english` analyzer after the tokenizer: possessive "'s" off, lower case, no
                stop word (None), Lucene's Porter stemmer (Martin Porter's reference version,
                which NLTK's MARTIN_EXTENSIONS mode reproduces)
  plain_term    the `suli_plain` analyzer: lower case, accents folded
  path_terms    the `suli_path` analyzer: lower case, split on / \\ . _ - and spaces

Measured against the node's `_analyze` on NFCorpus (bench/snippet_fidelity.py --analysis):
the stems agree on every token and the tokens on every document.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Iterable, Iterator

import regex
from nltk.stem.porter import PorterStemmer

from suli.text import ENGLISH_STOPWORDS

# Lucene's StandardTokenizer cuts a longer token into pieces of this length.
MAX_TOKEN_CHARS = 255

# ---- the tokenizer ----------------------------------------------------------------------------
# Two paths, one rule. Text of letters, digits and punctuation (all of NFCorpus, most of what
# agents write) goes through stdlib patterns, 10x faster than a general UAX#29 segmenter in
# Python; text with a character they do not model (ideographs and kana, which UAX#29 breaks
# per character; South-East Asian scripts; emoji, which Lucene keeps as tokens; combining
# marks; superscript digits; format and joiner characters) goes through the `regex` module's
# UAX#29 word boundaries.
#
# The fast path finds runs of word characters and joiners (_CHUNK); a run of only letters and
# digits is one token (UAX#29 WB5, WB8-WB10), the rare other run is split by _TOKEN, which
# spells out the joins of WB6-WB13b: letters across MidLetter (: · ...) or MidNumLetQ
# (' . ’ ...), digits across MidNum (, ; ...) or MidNumLetQ, letters and digits side by side,
# and `_` (ExtendNumLet) between or around any of them.
_MIDS = (
    ":\u00b7\u0387\u055f\u05f4\u2027\ufe13\ufe55\uff1a"  # MidLetter
    ",;\u037e\u0589\u060c\u060d\u066c\u07f8\u2044\ufe10\ufe14\ufe50\ufe54\uff0c\uff1b"  # MidNum
    "'.\u2018\u2019\u2024\ufe52\uff07\uff0e"  # MidNumLetQ
)
# Split (not finditer): one C call gives every run, and the offsets come from their lengths.
# © and ® are tokens of their own (emoji, to Lucene), common in abstracts' copyright lines.
_CHUNKS = re.compile(rf"([\u00a9\u00ae]|\w+(?:[{_MIDS}]\w+)*)")
_LETS = r"[^\W\d_]+"
_DIGS = r"\d+"
_MID_LETTER = "[:\u00b7\u0387\u055f\u05f4\u2027\ufe13\ufe55\uff1a'.\u2018\u2019\u2024\ufe52\uff07\uff0e]"
_MID_NUM = "[,;\u037e\u0589\u060c\u060d\u066c\u07f8\u2044\ufe10\ufe14\ufe50\ufe54\uff0c\uff1b'.\u2018\u2019\u2024\ufe52\uff07\uff0e]"
_UNIT = rf"(?:{_LETS}(?:{_MID_LETTER}{_LETS})*|{_DIGS}(?:{_MID_NUM}{_DIGS})*)"
_TOKEN = re.compile(rf"_*{_UNIT}(?:_*{_UNIT})*_*")
_CHUNK = re.compile(rf"\w+(?:[{_MIDS}]\w+)*")
_AFTER_JOIN = re.compile(rf"\w[{_MIDS}]")
# What the fast path does not model; any one of these sends the text to the slow path.
_COMPLEX = re.compile(
    "[\u00b2\u00b3\u00b9\u00bc-\u00be\u02b0-\u036f\u0483-\u0489"
    "\u0590-\u05ff\u0610-\u061a\u064b-\u065f\u0900-\u0fff\u1000-\u109f\u1780-\u17ff"
    "\u180b-\u180e\u1ab0-\u1aff\u1dc0-\u1dff\u200b-\u200f\u2028-\u202e\u203c\u2049"
    "\u2060-\u209f\u20d0-\u21ff\u2300-\u23ff\u2460-\u27bf\u2900-\u297f\u2b00-\u2bff"
    "\u2e80-\u303f\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua000-\ua4cf"
    "\ufb1d-\ufb4f\ufe00-\ufe0f\ufe20-\ufe2f\ufeff\uff00-\uffef\U00010000-\U0010ffff]"
)  # (not the math operators, common in text and never a token: the fast path drops them)
# A run of a South-East Asian script is one token in Lucene (UAX#29 alone breaks it per letter).
_SEGMENT = regex.compile(r"(?wV1)\p{Line_Break=SA}+|\b.+?\b", regex.DOTALL)
_WORDLIKE = regex.compile(
    r"[\p{WB=ALetter}\p{WB=Hebrew_Letter}\p{WB=Numeric}\p{WB=Katakana}\p{Ideographic}"
    r"\p{Script=Hiragana}\p{Line_Break=SA}\p{Extended_Pictographic}]"
)


def tokens(text: str) -> list[tuple[int, int]]:
    """The (start, end) character offsets of the standard tokenizer's tokens, in order."""
    if _COMPLEX.search(text) is None:
        parts = _CHUNKS.split(text)
        ends = list(itertools.accumulate(map(len, parts)))
        spans = []
        for chunk, start, end in zip(parts[1::2], ends[::2], ends[1::2], strict=False):
            if chunk.isalnum() or chunk in ("\u00a9", "\u00ae"):
                spans.append((start, end))
            else:
                spans += [(start + a, start + b) for a, b in _joined(chunk)]
    else:
        spans = [m.span() for m in _SEGMENT.finditer(text) if _WORDLIKE.search(m.group())]
    if any(b - a > MAX_TOKEN_CHARS for a, b in spans):
        spans = [piece for a, b in spans for piece in _pieces(a, b)]
    return spans


def starts_pattern(firsts: Iterable[str]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Patterns for tokens_at: the word runs that begin with one of `firsts` (lower-case
    letters, either case matched), and joiners inside a run followed by one of them. Each
    begins with a character class, which the stdlib engine scans for in C."""
    # Only the ASCII joiners: a class holding others costs the compiler ~0.25 ms each time
    # (one per query), and tokens_at leaves text holding the others to the full tokenizer.
    cls = "".join(re.escape(c) for c in sorted({*firsts, *(f.upper() for f in firsts)}))
    mids = re.escape(_ASCII_MIDS)
    runs = re.compile(rf"[{cls}](?<!\w\w)(?<!\w[{mids}]\w)\w*(?:[{mids}]\w+)*")
    inner = re.compile(rf"[{mids}](?<=\w[{mids}])(?=[{cls}])")
    return runs, inner


_ASCII_MIDS = "'.:,;"
_OTHER_MIDS = re.compile(f"[{''.join(c for c in _MIDS if not c.isascii())}]")
_MID_LETTERS = frozenset(_MID_LETTER[1:-1])
_MID_NUMS = frozenset(_MID_NUM[1:-1])


def _joins(before: str, mid: str, after: str) -> bool:
    """Whether UAX#29 joins two word characters across a joiner (WB6/7, WB11/12)."""
    if before.isalpha() and after.isalpha():
        return mid in _MID_LETTERS
    return before.isdigit() and after.isdigit() and mid in _MID_NUMS


def tokens_at(
    text: str, starts: tuple[re.Pattern[str], re.Pattern[str]]
) -> list[tuple[int, int]] | None:
    """The tokens of the word runs of text that begin with a letter of starts_pattern,
    without tokenizing the rest: a page's text is mostly words no query word begins like.
    None when text needs the full tokenizer (the slow path, a token cut at 255 characters,
    or such a letter starting a token inside a run, as "1,a" holds "a")."""
    if _COMPLEX.search(text) is not None or _OTHER_MIDS.search(text) is not None:
        return None
    runs, inner = starts
    for m in inner.finditer(text):
        at = m.end()
        if not _joins(text[at - 2], text[at - 1], text[at]):
            return None
    spans: list[tuple[int, int]] = []
    for m in runs.finditer(text):
        chunk = m.group()
        if chunk.isalnum():
            if len(chunk) > MAX_TOKEN_CHARS:
                return None
            spans.append(m.span())
        else:
            at = m.start()
            spans += [(at + a, at + b) for a, b in _joined(chunk)]
            if any(b - a > MAX_TOKEN_CHARS for a, b in spans[-1:]):
                return None
    return spans


def _joined(chunk: str) -> Iterator[tuple[int, int]]:
    return (t.span() for t in _TOKEN.finditer(chunk))


def _pieces(start: int, end: int) -> Iterator[tuple[int, int]]:
    while end - start > MAX_TOKEN_CHARS:
        yield start, start + MAX_TOKEN_CHARS
        start += MAX_TOKEN_CHARS
    yield start, end


def words(text: str) -> list[str]:
    """The tokens' text."""
    return [text[a:b] for a, b in tokens(text)]


# ---- the filters ------------------------------------------------------------------------------
_POSSESSIVE = ("'s", "'S", "\u2019s", "\u2019S", "\uff07s", "\uff07S")
_STEMMER = PorterStemmer(mode=PorterStemmer.MARTIN_EXTENSIONS)


def lower(word: str) -> str:
    """Lucene's LowerCaseFilter lowers code point by code point: never a longer string."""
    low = word.lower()
    return low if len(low) == len(word) else "".join(c.lower()[0] for c in word)


@functools.lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """Porter stem of a lower-cased word (cached: a stem costs ~30 us in NLTK, a page of text
    repeats most of its words)."""
    return _STEMMER.stem(word, to_lowercase=False)


def unpossessive(token: str) -> str:
    """The token without a trailing possessive 's (EnglishPossessiveFilter)."""
    return token[:-2] if token.endswith(_POSSESSIVE) else token


def english_term(token: str) -> str | None:
    """The `english` analyzer's term for one token; None for a stop word."""
    low = lower(unpossessive(token))
    if not low or low in ENGLISH_STOPWORDS:
        return None
    return stem(low)


def fold(word: str) -> str:
    """Accents off (asciifolding, as far as Unicode decomposition reaches)."""
    if word.isascii():
        return word
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def plain_term(token: str) -> str:
    """The `suli_plain` analyzer's term for one token."""
    return fold(lower(token))


_PATH_SPLIT = re.compile(r"[/\\._\-\s]+")


def path_terms(text: str) -> list[str]:
    """The `suli_path` analyzer's terms of a text."""
    return [lower(t) for t in _PATH_SPLIT.split(text) if t]
