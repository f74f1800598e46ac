"""Snippets: the core's marked fragments (checked against an independent oracle), the best
passage and clipping (HTML-safe), bounded on huge bodies."""

import html
import re
from typing import Any

import regex
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.stem.porter import PorterStemmer
from pytest import MonkeyPatch

from suli import analysis
from suli.analysis import words as words_of
from suli.models import Item
from suli.snippets import (
    FRAGMENT_CHARS,
    SCAN_CHARS,
    TextFieldsMode,
    best_passage,
    clip,
    item_snippet,
    marks,
    matcher,
    passages,
    snippet,
)
from suli.text import ENGLISH_STOPWORDS, only_common_words, words


def test_best_passage_prefers_shared_words() -> None:
    text = (
        ("Intro about nothing in particular. " * 10)
        + "The rollback plan restores the database. "
        + ("Outro filler text here. " * 10)
    )
    assert "rollback" in best_passage(text, "how do we roll back a database")
    assert best_passage(text, "zzz").startswith("Intro")


def test_clip_escapes_and_cuts() -> None:
    out = clip("<script>alert(1)</script> " + "word " * 100, 50)
    assert "<script>" not in out and "&lt;script&gt;" in out
    assert out.endswith("…") and len(out) < 60


def test_passages_cover_text() -> None:
    text = " ".join(f"w{i}." for i in range(200))
    ps = passages(text, 40)
    assert " ".join(ps).split() == text.split()
    assert all(len(p.split()) <= 80 for p in ps)


def test_common_words() -> None:
    assert only_common_words("The")
    assert not only_common_words("the deploy")
    assert not only_common_words("")
    assert words('title:(foo) AND "bar*') == ["title", "foo", "and", "bar"]


# ---- the core's snippet maker (suli.snippets.snippet, suli.analysis) ----------------------


def _marked(html_text: str) -> list[str]:
    """The words a snippet marks, as plain text."""
    return [html.unescape(w) for w in re.findall(r"<mark>(.*?)</mark>", html_text)]


def _marks(text: str, query: str, mode: TextFieldsMode = "stemmed") -> list[str]:
    return [text[a:b] for a, b in marks(text, matcher(query, mode))]


def test_marks_the_query_words_by_their_stems_and_nothing_else() -> None:
    body = "Statins and cancer: the statin users' cancers. Stature, stating, candor, cancel."
    # "cancel" is one edit from "cancer" (a typo the word leg forgives); "stating" stems to
    # "state", two edits from "statin".
    assert _marks(body, "statin cancer") == ["Statins", "cancer", "statin", "cancers", "cancel"]
    assert _marks("Cats and cat's CAT", "cat") == ["Cats", "cat's", "CAT"]
    # A stem that is no prefix of its word: "happy" and "happiness" both stem to "happi".
    assert _marks("A happy baby.", "happiness babies") == ["happy", "baby"]


def test_marks_one_typo_corrections_with_the_first_letter_fixed() -> None:
    # "cancr" (5 letters: one edit) reaches "cancer" (an insertion); a swap is one edit;
    # a wrong first letter never matches; "cand" and "cnacer" are two edits away.
    body = "cancer bancer cand cnacer"
    assert _marks(body, "cancr") == ["cancer"]
    assert _marks("statin sattin", "sattin") == ["statin", "sattin"]  # a swap: one edit
    # From five letters one edit: an insertion, a change, a swap; "vtamin" is two away.
    assert _marks("vitamin vitamins vitamen vtamin vitman", "vitamn") == [
        "vitamin",
        "vitamins",
        "vitamen",
        "vitman",
    ]
    # From eight letters two edits, of the word's stem as the highlighter compares them
    # ("dibetes" stems to "dibet", three from "diabetis").
    assert _marks("diabetes diabetic diabets dibetes", "diabetis") == [
        "diabetes",
        "diabetic",
        "diabets",
    ]


def test_marks_words_the_last_query_word_begins() -> None:
    assert _marks("cholesterol lowers chole", "lowering chole") == [
        "cholesterol",
        "lowers",
        "chole",
    ]
    # Not for a word that is not the last one, nor for a last word under three letters.
    assert _marks("cholesterol", "chole levels") == []


def test_common_words_mark_only_a_query_of_only_common_words() -> None:
    text = "The cat and the hat"
    assert _marks(text, "the cat") == ["cat"]
    assert _marks(text, "the", "plain") == ["The", "the"]


def test_words_stay_whole_as_lucenes_standard_tokenizer_keeps_them() -> None:
    text = "don't O'Reilly's 3.14 U.S.A e-mail foo_bar"
    assert words_of(text) == ["don't", "O'Reilly's", "3.14", "U.S.A", "e", "mail", "foo_bar"]
    assert _marks(text, "reilly") == []
    assert _marks(text, "o'reilly") == ["O'Reilly's"]  # the possessive goes, as in the index
    assert _marks(text, "mail 3.14") == ["3.14", "mail"]
    assert _marks("1,abc 2.5mg", "abc") == ["abc"]  # a failed join inside a run of words
    assert _marks("Herbalife® ©", "herbalife®") == ["Herbalife", "®"]  # emoji, to Lucene


def test_snippets_are_html_safe_on_hostile_text_and_queries() -> None:
    body = "<script>alert('statin')</script> &amp; <mark>statin</mark> <b onclick=x>statin</b>"
    for query in ("statin", "<script>", "mark statin", "</mark> b onclick"):
        out = snippet({"body": body}, query, "stemmed", True)
        outside = re.sub(r"</?mark>", "", out)
        assert "<" not in outside and ">" not in outside, out
        assert "&lt;" in out and "&amp;amp;" in out  # the text's own markup, escaped
    out = snippet({"body": body}, "mark statin", "stemmed", True)
    assert _marked(out) == ["statin", "mark", "statin", "mark", "statin"]


def test_fragment_is_about_160_characters_around_the_most_distinct_words() -> None:
    filler = "lorem ipsum dolor sit amet " * 40
    body = filler + "statin here and cancer there " + filler + "statin alone " + filler
    out = snippet({"title": "Statins", "body": body}, "statin cancer", "stemmed", True)
    assert _marked(out) == ["statin", "cancer"]
    assert out.startswith("…") and out.endswith("…")
    assert FRAGMENT_CHARS - 20 <= len(re.sub(r"</?mark>", "", out)) <= FRAGMENT_CHARS + 30


def test_fields_are_tried_body_then_caption_then_title() -> None:
    fields = {"title": "statin title", "body": "no match here", "caption": "a statin caption"}
    assert snippet(fields, "statin", "stemmed", True) == "a <mark>statin</mark> caption"
    fields["caption"] = ""
    assert snippet(fields, "statin", "stemmed", True) == "<mark>statin</mark> title"


def test_a_page_item_is_snippeted_from_its_title_body_and_caption() -> None:
    item = Item(id="i", workspace="w", title="Statins", body="", caption="a statin caption")
    assert item_snippet(item, "statin", "stemmed", True) == "a <mark>statin</mark> caption"
    assert item_snippet(item, "statin", "stemmed", False) == "a statin caption"


def test_meaning_only_hits_and_unmarked_text_hits_show_the_best_passage() -> None:
    fields = {"title": "Statins", "body": "Some body. About statins here."}
    assert snippet(fields, "statin", "stemmed", False) == best_passage(fields["body"], "statin")
    # A text hit through a field no snippet shows (path, tags) gets its best passage too.
    assert snippet({"body": "Other words."}, "statin", "stemmed", True) == "Other words."


def test_a_huge_body_is_marked_in_its_first_scan_chars_only(monkeypatch: MonkeyPatch) -> None:
    """Bounded work: however long the body, no step sees more than SCAN_CHARS of it, and a
    word past them is not looked for (the snippet is then the best passage)."""
    seen: list[int] = []
    for name in ("tokens", "tokens_at"):
        real = getattr(analysis, name)

        def spy(text: str, *a: Any, _real: Any = real) -> Any:
            seen.append(len(text))
            return _real(text, *a)

        monkeypatch.setattr(analysis, name, spy)
    filler = "lorem ipsum dolor sit amet. " * (1_000_000 // 28)
    late = filler + "statin"
    out = snippet({"body": late}, "statin", "stemmed", True)
    assert "<mark>" not in out and seen and max(seen) <= SCAN_CHARS
    early = "statin " + filler
    assert _marked(snippet({"body": early}, "statin", "stemmed", True)) == ["statin"]
    assert max(seen) <= SCAN_CHARS


# The oracle: written apart from suli.snippets and suli.analysis. Tokens from the `regex`
# module's UAX#29 word boundaries, a Damerau (optimal string alignment) distance by dynamic
# programming, the rule as the module docstring states it. Only the Porter stemmer and the
# stop list are shared: both are checked against the engine (bench/snippet_fidelity.py).
_PORTER = PorterStemmer(mode=PorterStemmer.MARTIN_EXTENSIONS)
_SEG = regex.compile(r"(?wV1)\b.+?\b", regex.DOTALL)


def _oracle_tokens(text: str) -> list[str]:
    return [s for s in (m.group() for m in _SEG.finditer(text)) if any(c.isalnum() for c in s)]


def _oracle_term(token: str) -> str | None:
    if token[-2:] in ("'s", "'S", "’s", "’S"):
        token = token[:-2]
    low = token.lower()
    return None if not low or low in ENGLISH_STOPWORDS else _PORTER.stem(low, to_lowercase=False)


def _osa(a: str, b: str) -> int:
    d = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) + 1):
        d[i][0] = i
    for j in range(len(b) + 1):
        d[0][j] = j
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]


def _oracle_marks(text: str, query: str) -> list[str]:
    qwords = re.findall(r"\w+", query.lower())
    terms = {t for t in map(_oracle_term, _oracle_tokens(query)) if t}
    terms |= {t for t in re.split(r"[/\\._\-\s]+", query.lower()) if _oracle_tokens(t) == [t]}
    content = [w for w in qwords if w not in ENGLISH_STOPWORDS]
    fuzzy = [(w, 1 if len(w) < 8 else 2) for w in dict.fromkeys(content) if len(w) >= 5][:8]
    last = qwords[-1] if qwords else ""
    prefix = last if len(last) >= 3 and last not in ENGLISH_STOPWORDS else None
    out = []
    for tok in _oracle_tokens(text):
        term = _oracle_term(tok)
        if term is None:
            continue
        if (
            term in terms
            or (prefix is not None and term.startswith(prefix))
            or any(term[0] == w[0] and _osa(term[1:], w[1:]) <= k for w, k in fuzzy)
        ):
            out.append(tok)
    return out


_VOCAB = [
    "statin", "statins", "stating", "cancer", "cancers", "cancr", "cnacer", "breast",
    "braest", "diabetes", "diabetic", "nutrition", "nutriton", "cholesterol", "the", "and",
    "Reilly's", "O'Reilly", "don't", "3.14", "U.S.A", "1,000", "foo_bar", "e-mail", "<b>",
    "&amp;", "x", "ab", "abc", "café", "naïve", "Straße", "it's", "a.b", "2mg",
]  # fmt: skip
_SEPS = [" ", " ", " ", ", ", ". ", "\n", "-", "'", ".", ":", ",", "/", "’", "_", ""]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(_VOCAB), st.sampled_from(_SEPS)), max_size=40),
    st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=4),
)
def test_marks_agree_with_an_independent_oracle(
    parts: list[tuple[str, str]], qwords: list[str]
) -> None:
    text = "".join(w + s for w, s in parts)
    query = " ".join(qwords)
    if only_common_words(query):
        return  # the plain rule: covered by test_common_words_mark_only_...
    assert _marks(text, query) == _oracle_marks(text, query)
    out = snippet({"body": text}, query, "stemmed", True)
    assert set(_marked(out)) <= set(_oracle_marks(text, query))
    # Nothing but the text's own words (passages join them with single spaces).
    plain = " ".join(html.unescape(re.sub(r"</?mark>", "", out)).strip("…").split())
    assert plain in " ".join(text.split())


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.one_of(st.characters(codec="utf-8"), st.sampled_from("ab1_'.,:;’ -©①²é\u0301")),
        max_size=60,
    )
)
def test_the_fast_tokenizer_is_uax29_as_the_regex_module_reads_it(text: str) -> None:
    # Lucene differs from plain UAX#29 on South-East Asian runs (one token), which the slow
    # path joins; the oracle does not know them, so they stay out of this comparison.
    if regex.search(r"\p{Line_Break=SA}", text):
        return
    # A segment is a token when it holds a letter, digit, ideograph, kana or emoji, by the
    # Unicode properties Lucene's tokenizer keys its token types on.
    keep = regex.compile(
        r"[\p{WB=ALetter}\p{WB=Hebrew_Letter}\p{WB=Numeric}\p{WB=Katakana}\p{Ideographic}"
        r"\p{Script=Hiragana}\p{Extended_Pictographic}]"
    )
    segments = [m.group() for m in _SEG.finditer(text)]
    assert words_of(text) == [t for t in segments if keep.search(t)]


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=14))
def test_a_porter_stem_keeps_the_word_but_its_last_letter(word: str) -> None:
    """may_match skips stemming a word unless it begins like a term: sound only while a stem
    without its last letter is a prefix of the word (also held on all 29,444 NFCorpus words)."""
    assert word.startswith(analysis.stem(word)[:-1])
    for suffix in ("ational", "biliti", "iveness", "ization", "ies", "logi", "ed", "ing"):
        assert (word + suffix).startswith(analysis.stem(word + suffix)[:-1])


def test_the_fast_path_knows_what_it_does_not_model() -> None:
    """Every BMP character the fast tokenizer would read other than UAX#29 does (by the
    `regex` module's Unicode tables) is in analysis._COMPLEX, which sends text holding it
    to the UAX#29 segmenter."""
    special = regex.compile(
        r"[\p{WB=Extend}\p{WB=Format}\p{WB=ZWJ}\p{WB=Katakana}\p{Ideographic}"
        r"\p{Script=Hiragana}\p{Line_Break=SA}\p{Extended_Pictographic}\p{WB=ExtendNumLet}]"
    )
    letter = regex.compile(r"[\p{WB=ALetter}\p{WB=Hebrew_Letter}]")
    numeric = regex.compile(r"\p{WB=Numeric}")
    missed = []
    for cp in range(0x20, 0x10000):
        c = chr(cp)
        if 0xD800 <= cp < 0xE000 or c in "_\u00a9\u00ae" or analysis._COMPLEX.match(c):
            continue
        model = "L" if letter.match(c) else "N" if numeric.match(c) else "-"
        fast = "L" if re.match(r"[^\W\d_]", c) else "N" if re.match(r"\d", c) else "-"
        if special.match(c) or model != fast:
            missed.append(f"U+{cp:04X}")
    assert not missed
