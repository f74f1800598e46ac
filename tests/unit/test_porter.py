"""suli.porter is Lucene's Porter stemmer: equal to NLTK's PorterStemmer(MARTIN_EXTENSIONS)
(Martin Porter's reference version, which Lucene ports) on tricky and generated words. The
node's own `english` analyzer agrees with it on every NFCorpus word
(`python -m bench.snippet_fidelity --analysis`)."""

from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.stem.porter import PorterStemmer

from suli import porter

NLTK = PorterStemmer(mode=PorterStemmer.MARTIN_EXTENSIONS)
# The steps' suffixes, so generated words reach every rule.
_SUFFIX_TEXT = (
    "ational tional enci anci izer bli alli entli eli ousli ization ation ator alism "
    "iveness fulness ousness aliti iviti biliti logi icate ative alize iciti ical ful "
    "ness al ance ence er ic able ible ant ement ment ent ion sion tion ou ism ate iti "
    "ous ive ize ing ed s ies sses eed y ly e ll at bl iz ss"
)
SUFFIXES = tuple(_SUFFIX_TEXT.split())


def test_known_words_stem_as_lucene_stems_them() -> None:
    cases = {
        "caresses": "caress", "ponies": "poni", "cats": "cat", "agreed": "agre",
        "hopping": "hop", "filing": "file", "happy": "happi", "relational": "relat",
        "generalization": "gener", "sensibility": "sensibl", "analogies": "analog",
        "possibly": "possibl", "statins": "statin", "diabetes": "diabet", "cry": "cry",
        "is": "is", "a": "a", "sky": "sky", "running": "run", "rune": "rune",
    }  # fmt: skip
    for word, want in cases.items():
        assert porter.stem(word) == want == NLTK.stem(word, to_lowercase=False), word


@settings(max_examples=2000, deadline=None)
@given(
    st.text(alphabet="abcdeilmnorstuvyzé", max_size=7),
    st.lists(st.sampled_from(SUFFIXES), max_size=3),
)
def test_equal_to_nltks_martin_porter_on_generated_words(stem: str, suffixes: list[str]) -> None:
    word = stem + "".join(suffixes)
    assert porter.stem(word) == NLTK.stem(word, to_lowercase=False)
