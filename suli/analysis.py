"""The index's text analysis in Python: the words OpenSearch's analyzers (mappings/items.json)
make of a text, with their character offsets, so the core can mark in an item's own text the
words a query matched (suli.snippets).

  tokens        Lucene's standard tokenizer (UAX#29 word breaks: "don't", "O'Reilly's", "3.14",
                "U.S.A" and "foo_bar" stay whole; "e-mail" is two words)
  english_term  the `english` analyzer after the tokenizer: possessive "'s" off, lower case, no
                stop word (None), Lucene's Porter stemmer (suli.porter: Martin Porter's
                reference version, as NLTK's MARTIN_EXTENSIONS mode has it)
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

from suli import porter
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
_SYMBOLS = ("\u00a9", "\u00ae")
_CHUNKS = re.compile(rf"([\u00a9\u00ae]|\w+(?:[{_MIDS}]\w+)*)")
_LETS = r"[^\W\d_]+"
_DIGS = r"\d+"
_MID_LETTER = (
    "[:\u00b7\u0387\u055f\u05f4\u2027\ufe13\ufe55\uff1a'.\u2018\u2019\u2024\ufe52\uff07\uff0e]"
)
_MID_NUM = "[,;\u037e\u0589\u060c\u060d\u066c\u07f8\u2044\ufe10\ufe14\ufe50\ufe54\uff0c\uff1b'.\u2018\u2019\u2024\ufe52\uff07\uff0e]"
_UNIT = rf"(?:{_LETS}(?:{_MID_LETTER}{_LETS})*|{_DIGS}(?:{_MID_NUM}{_DIGS})*)"
_TOKEN = re.compile(rf"_*{_UNIT}(?:_*{_UNIT})*_*")
_CHUNK = re.compile(rf"\w+(?:[{_MIDS}]\w+)*")
_AFTER_JOIN = re.compile(rf"\w[{_MIDS}]")
# What the fast path does not model; any one of these sends the text to the slow path: every
# character whose UAX#29 word-break class is not what the stdlib's \w and \d make of it
# (Extend, Format, ZWJ, Katakana, ExtendNumLet but `_`, a letter \w misses, a \w that is no
# word character, as ² and ¼), every ideograph, kana, South-East Asian letter and emoji, and
# every character past the BMP. Written out from the `regex` module's Unicode tables by
# tests/unit/test_snippets.py (test_the_fast_path_knows_what_it_does_not_model), which fails
# when a newer Unicode moves a character.
_COMPLEX = re.compile(
    "["
    "\u00ad\u00b2-\u00b3\u00b8-\u00b9\u00bc-\u00be\u02c2-\u02c5\u02d2-\u02d7\u02de-\u02df"
    "\u02e5-\u02eb\u02ed\u02ef-\u036f\u0483-\u0489\u0558\u055a-\u055c\u055e\u058a-\u058c"
    "\u0591-\u05bd\u05bf\u05c1-\u05c2\u05c4-\u05c5\u05c7-\u05c9\u05f3\u0600-\u0605"
    "\u0610-\u061a\u061c\u064b-\u065f\u066b\u0670\u06d6-\u06dd\u06df-\u06e4\u06e7-\u06e8"
    "\u06ea-\u06ed\u070f\u0711\u0730-\u074a\u07a6-\u07b0\u07eb-\u07f3\u07fd\u0816-\u0819"
    "\u081b-\u0823\u0825-\u0827\u0829-\u082d\u0859-\u085b\u088f-\u0891\u0897-\u089f"
    "\u08ca-\u0903\u093a-\u093c\u093e-\u094f\u0951-\u0957\u0962-\u0963\u0981-\u0983\u09bc"
    "\u09be-\u09c4\u09c7-\u09c8\u09cb-\u09cd\u09d7\u09e2-\u09e3\u09f4-\u09f9\u09fe"
    "\u0a01-\u0a03\u0a3c\u0a3e-\u0a42\u0a47-\u0a48\u0a4b-\u0a4d\u0a51\u0a70-\u0a71\u0a75"
    "\u0a81-\u0a83\u0abc\u0abe-\u0ac5\u0ac7-\u0ac9\u0acb-\u0acd\u0ae2-\u0ae3\u0afa-\u0aff"
    "\u0b01-\u0b03\u0b3c\u0b3e-\u0b44\u0b47-\u0b48\u0b4b-\u0b4d\u0b53-\u0b57\u0b62-\u0b63"
    "\u0b72-\u0b77\u0b82\u0bbe-\u0bc2\u0bc6-\u0bc8\u0bca-\u0bcd\u0bd7\u0bf0-\u0bf2"
    "\u0c00-\u0c04\u0c3c\u0c3e-\u0c44\u0c46-\u0c48\u0c4a-\u0c4d\u0c55-\u0c56\u0c5c"
    "\u0c62-\u0c63\u0c78-\u0c7e\u0c81-\u0c83\u0cbc\u0cbe-\u0cc4\u0cc6-\u0cc8\u0cca-\u0ccd"
    "\u0cd5-\u0cd6\u0cdc\u0ce2-\u0ce3\u0cf3\u0d00-\u0d03\u0d3b-\u0d3c\u0d3e-\u0d44"
    "\u0d46-\u0d48\u0d4a-\u0d4d\u0d57-\u0d5e\u0d62-\u0d63\u0d70-\u0d78\u0d81-\u0d83\u0dca"
    "\u0dcf-\u0dd4\u0dd6\u0dd8-\u0ddf\u0df2-\u0df3\u0e01-\u0e3a\u0e40-\u0e4e\u0e81-\u0e82"
    "\u0e84\u0e86-\u0e8a\u0e8c-\u0ea3\u0ea5\u0ea7-\u0ebd\u0ec0-\u0ec4\u0ec6\u0ec8-\u0ece"
    "\u0edc-\u0edf\u0f18-\u0f19\u0f2a-\u0f33\u0f35\u0f37\u0f39\u0f3e-\u0f3f\u0f71-\u0f84"
    "\u0f86-\u0f87\u0f8d-\u0f97\u0f99-\u0fbc\u0fc6\u1000-\u103f\u1050-\u108f\u109a-\u109f"
    "\u135d-\u135f\u1369-\u137c\u1712-\u1715\u1732-\u1734\u1752-\u1753\u1772-\u1773"
    "\u1780-\u17d3\u17d7\u17dc-\u17dd\u17f0-\u17f9\u180b-\u180f\u1885-\u1886\u18a9"
    "\u1920-\u192b\u1930-\u193b\u1950-\u196d\u1970-\u1974\u1980-\u19ab\u19b0-\u19c9\u19da"
    "\u19de-\u19df\u1a17-\u1a1b\u1a20-\u1a5e\u1a60-\u1a7c\u1a7f\u1aa0-\u1aad\u1ab0-\u1af0"
    "\u1b00-\u1b04\u1b34-\u1b44\u1b6b-\u1b73\u1b80-\u1b82\u1ba1-\u1bad\u1be6-\u1bf3"
    "\u1c24-\u1c37\u1c89-\u1c8a\u1cd0-\u1cd2\u1cd4-\u1ce8\u1ced\u1cf4\u1cf7-\u1cf9"
    "\u1dc0-\u1dff\u200c-\u200f\u202a-\u202f\u203c\u203f-\u2040\u2049\u2054\u2060-\u2064"
    "\u2066-\u2070\u2074-\u2079\u2080-\u2089\u208f\u209d-\u209f\u20d0-\u20f0\u2122\u2139"
    "\u2150-\u215f\u2189\u2194-\u2199\u21a9-\u21aa\u231a-\u231b\u2328\u23cf\u23e9-\u23f3"
    "\u23f8-\u23fa\u2460-\u249b\u24b6-\u24ff\u25aa-\u25ab\u25b6\u25c0\u25fb-\u25fe"
    "\u2600-\u2604\u260e\u2611\u2614-\u2615\u2618\u261d\u2620\u2622-\u2623\u2626\u262a"
    "\u262e-\u262f\u2638-\u263a\u2640\u2642\u2648-\u2653\u265f-\u2660\u2663\u2665-\u2666"
    "\u2668\u267b\u267e-\u267f\u2692-\u2697\u2699\u269b-\u269c\u26a0-\u26a1\u26a7"
    "\u26aa-\u26ab\u26b0-\u26b1\u26bd-\u26be\u26c4-\u26c5\u26c8\u26ce-\u26cf\u26d1"
    "\u26d3-\u26d4\u26e9-\u26ea\u26f0-\u26f5\u26f7-\u26fa\u26fd\u2702\u2705\u2708-\u270d"
    "\u270f\u2712\u2714\u2716\u271d\u2721\u2728\u2733-\u2734\u2744\u2747\u274c\u274e"
    "\u2753-\u2755\u2757\u2763-\u2764\u2776-\u2793\u2795-\u2797\u27a1\u27b0\u27bf"
    "\u2934-\u2935\u2b05-\u2b07\u2b1b-\u2b1c\u2b50\u2b55\u2cef-\u2cf1\u2cfd\u2d7f"
    "\u2de0-\u2dff\u3006-\u3007\u3021-\u3035\u3038-\u303a\u303d\u3041-\u3096\u3099-\u30fa"
    "\u30fc-\u30ff\u3192-\u3195\u31f0-\u31ff\u3220-\u3229\u3248-\u324f\u3251-\u325f"
    "\u3280-\u3289\u3297\u3299\u32b1-\u32bf\u32d0-\u32fe\u3300-\u3357\u3400-\u4dbf"
    "\u4e00-\u9fff\ua66f-\ua672\ua674-\ua67d\ua69e-\ua69f\ua6f0-\ua6f1\ua708-\ua716"
    "\ua720-\ua721\ua789-\ua78a\ua7cb-\ua7cf\ua7d2\ua7d4\ua7da-\ua7dd\ua7e2\ua7f1\ua802"
    "\ua806\ua80b\ua823-\ua827\ua82c\ua830-\ua835\ua880-\ua881\ua8b4-\ua8c5\ua8e0-\ua8f1"
    "\ua8ff\ua926-\ua92d\ua947-\ua953\ua980-\ua983\ua9b3-\ua9c0\ua9e0-\ua9ef\ua9fa-\ua9fe"
    "\uaa29-\uaa36\uaa43\uaa4c-\uaa4d\uaa60-\uaac2\uaadb-\uaadf\uaaeb-\uaaef\uaaf5-\uaaf6"
    "\uab5b\uab6c-\uab6d\uabe3-\uabea\uabec-\uabed\uf900-\ufa6d\ufa70-\ufad9\ufb1e"
    "\ufe00-\ufe0f\ufe20-\ufe2f\ufe33-\ufe34\ufe4d-\ufe4f\ufeff\uff3f\uff66-\uff9f"
    "\ufff9-\ufffb"
    "\U00010000-\U0010ffff]"
)
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
            if chunk.isalnum() or chunk in _SYMBOLS:
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
        if chunk.isalnum() or chunk in _SYMBOLS:
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


def lower(word: str) -> str:
    """Lucene's LowerCaseFilter lowers code point by code point: never a longer string."""
    low = word.lower()
    return low if len(low) == len(word) else "".join(c.lower()[0] for c in word)


@functools.lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """Porter stem of a lower-cased word (cached: a stem costs ~15 us, and a page of text
    repeats most of its words)."""
    return porter.stem(word)


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
