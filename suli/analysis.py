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
import re
import unicodedata
from collections.abc import Iterator

import regex
from nltk.stem.porter import PorterStemmer

from suli.text import ENGLISH_STOPWORDS

# Lucene's StandardTokenizer cuts a longer token into pieces of this length.
MAX_TOKEN_CHARS = 255

# ---- the tokenizer ----------------------------------------------------------------------------
# Two paths, one rule. Text of letters, digits and punctuation (all of NFCorpus, most of what
# agents write) goes through one stdlib pattern, 10x faster than a general UAX#29 segmenter in
# Python; text with a character that pattern does not model (ideographs and kana, which UAX#29
# breaks per character; South-East Asian scripts; emoji, which Lucene keeps as tokens; format
# and joiner characters) goes through the `regex` module's UAX#29 word boundaries.
#
# The pattern's joins are UAX#29's rules WB6-WB13b: letters across MidLetter (: · ...) or
# MidNumLetQ (' . ’ ...), digits across MidNum (, ; ...) or MidNumLetQ, letters and digits
# side by side, and `_` (ExtendNumLet) between or around any of them.
_LET = r"[^\W\d_\u00b2\u00b3\u00b9\u00bc-\u00be\u2070-\u209f\u2150-\u218f\u2460-\u24ff]"  # no super-/subscript digit, fraction, roman or circled numeral
_MARK = r"[\u0300-\u036f]"  # combining accents (Extend): part of the word they follow
_MID_LETTER = r"[:\u00b7\u0387\u055f\u05f4\u2027\ufe13\ufe55\uff1a'.\u2018\u2019\u2024\ufe52\uff07\uff0e]"
_MID_NUM = r"[,;\u037e\u0589\u060c\u060d\u066c\u07f8\u2044\ufe10\ufe14\ufe50\ufe54\uff0c\uff1b'.\u2018\u2019\u2024\ufe52\uff07\uff0e]"
_LETS = rf"(?:{_LET}{_MARK}*)+"
_DIGS = r"(?:\d" + _MARK + r"*)+"
_UNIT = rf"(?:{_LETS}(?:{_MID_LETTER}{_LETS})*|{_DIGS}(?:{_MID_NUM}{_DIGS})*)"
_TOKEN = re.compile(rf"_*{_UNIT}(?:_*{_UNIT})*_*")
# What the fast pattern does not model; any one of these sends the text to the slow path.
_COMPLEX = re.compile(
    "[\u00a9\u00ae\u02b0-\u02ff\u0590-\u05ff\u0e00-\u0fff\u1000-\u109f\u1780-\u17ff"
    "\u180b-\u180e\u200b-\u200f\u2028-\u202e\u203c\u2049\u2060-\u206f\u2100-\u2bff"
    "\u2e80-\u303f\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua000-\ua4cf"
    "\uf900-\ufaff\ufe00-\ufe0f\ufeff\uff00-\uffef\U00010000-\U0010ffff]"
)
# A run of a South-East Asian script is one token in Lucene (UAX#29 alone breaks it per letter).
_SEGMENT = regex.compile(r"(?wV1)\p{Line_Break=SA}+|\b.+?\b", regex.DOTALL)
_WORDLIKE = regex.compile(
    r"[\p{WB=ALetter}\p{WB=Hebrew_Letter}\p{WB=Numeric}\p{WB=Katakana}\p{Ideographic}"
    r"\p{Script=Hiragana}\p{Line_Break=SA}\p{Extended_Pictographic}]"
)


def tokens(text: str) -> Iterator[tuple[int, int]]:
    """The (start, end) character offsets of the standard tokenizer's tokens, in order."""
    if _COMPLEX.search(text) is None:
        spans: Iterator[tuple[int, int]] = (m.span() for m in _TOKEN.finditer(text))
    else:
        spans = (m.span() for m in _SEGMENT.finditer(text) if _WORDLIKE.search(m.group()))
    for start, end in spans:
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


def english_term(token: str) -> str | None:
    """The `english` analyzer's term for one token; None for a stop word."""
    if token.endswith(_POSSESSIVE):
        token = token[:-2]
    low = lower(token)
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
