"""The query words the typo clauses take (DESIGN 3.12), and the edits each may carry."""

from hypothesis import given, settings
from hypothesis import strategies as st

from suli.text import ENGLISH_STOPWORDS, MAX_TYPO_WORDS, max_edits, prefix_word, typo_words


def test_long_words_only_never_common_ones_in_order_once() -> None:
    assert typo_words("Deplyo the cheklist, deplyo AND there") == ["deplyo", "cheklist"]
    assert typo_words("teh rool a") == []  # under five letters: exact only


def test_edits_grow_with_the_word() -> None:
    assert [max_edits("x" * n) for n in (4, 5, 7, 8, 12)] == [0, 1, 1, 2, 2]


def test_the_last_word_is_a_prefix_unless_short_or_common() -> None:
    assert prefix_word("canary dash") == "dash"
    assert prefix_word("canary ca") is None and prefix_word("deploy the") is None
    assert prefix_word("") is None


def test_a_long_query_corrects_its_first_words_only() -> None:
    text = " ".join(f"word{chr(97 + n)}x" for n in range(20))
    assert typo_words(text) == [f"word{chr(97 + n)}x" for n in range(MAX_TYPO_WORDS)]


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="abcdefgh ,.-", max_size=60))
def test_every_typo_word_is_a_long_uncommon_query_word(text: str) -> None:
    plain = text.lower().replace(",", " ").replace(".", " ").replace("-", " ").split()
    expected = []
    for w in plain:
        if len(w) >= 5 and w not in ENGLISH_STOPWORDS and w not in expected:
            expected.append(w)
    assert typo_words(text) == expected[:MAX_TYPO_WORDS]
