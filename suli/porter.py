"""The Porter stemmer as Lucene's PorterStemmer has it: Martin Porter's reference C version
(with its two departures from the 1980 paper, -bli -> -ble and -logi -> -log), which differs
from the paper and from Porter2/Snowball.

Written here rather than imported: NLTK's PorterStemmer(MARTIN_EXTENSIONS) is the same
algorithm, but importing `nltk` takes about a second (its package imports everything), which
every CLI search would pay. tests/unit/test_porter.py holds this module equal to NLTK's on
NFCorpus's words and on generated ones; bench/snippet_fidelity.py --analysis to the node's
`english` analyzer.

The steps keep the C version's names and order; `k` is the index of the word's last letter,
`j` the end of the stem a suffix test (`_ends`) leaves.
"""

from __future__ import annotations


class _Word:
    __slots__ = ("b", "j", "k")

    def __init__(self, word: str) -> None:
        self.b = list(word)
        self.k = len(word) - 1
        self.j = 0

    def cons(self, i: int) -> bool:
        """Whether b[i] is a consonant (y is one at the start or after a vowel)."""
        ch = self.b[i]
        if ch in "aeiou":
            return False
        if ch == "y":
            return i == 0 or not self.cons(i - 1)
        return True

    def m(self) -> int:
        """The number of consonant-vowel sequences in b[0..j] (the [C](VC){m}[V] measure)."""
        n, i, j = 0, 0, self.j
        while True:
            if i > j:
                return n
            if not self.cons(i):
                break
            i += 1
        i += 1
        while True:
            while True:
                if i > j:
                    return n
                if self.cons(i):
                    break
                i += 1
            i += 1
            n += 1
            while True:
                if i > j:
                    return n
                if not self.cons(i):
                    break
                i += 1
            i += 1

    def vowel_in_stem(self) -> bool:
        return any(not self.cons(i) for i in range(self.j + 1))

    def doublec(self, j: int) -> bool:
        return j >= 1 and self.b[j] == self.b[j - 1] and self.cons(j)

    def cvc(self, i: int) -> bool:
        """Whether b[i-2..i] is consonant-vowel-consonant, the last not w, x or y."""
        if i < 2 or not self.cons(i) or self.cons(i - 1) or not self.cons(i - 2):
            return False
        return self.b[i] not in "wxy"

    def ends(self, s: str) -> bool:
        n = len(s)
        if n > self.k + 1 or "".join(self.b[self.k - n + 1 : self.k + 1]) != s:
            return False
        self.j = self.k - n
        return True

    def setto(self, s: str) -> None:
        self.b[self.j + 1 : self.k + 1] = list(s)
        self.k = self.j + len(s)

    def r(self, s: str) -> None:
        if self.m() > 0:
            self.setto(s)

    def step1ab(self) -> None:
        b = self.b
        if b[self.k] == "s":
            if self.ends("sses"):
                self.k -= 2
            elif self.ends("ies"):
                self.setto("i")
            elif b[self.k - 1] != "s":
                self.k -= 1
        if self.ends("eed"):
            if self.m() > 0:
                self.k -= 1
        elif (self.ends("ed") or self.ends("ing")) and self.vowel_in_stem():
            self.k = self.j
            if self.ends("at"):
                self.setto("ate")
            elif self.ends("bl"):
                self.setto("ble")
            elif self.ends("iz"):
                self.setto("ize")
            elif self.doublec(self.k):
                self.k -= 1
                if b[self.k] in "lsz":
                    self.k += 1
            elif self.m() == 1 and self.cvc(self.k):
                self.setto("e")

    def step1c(self) -> None:
        if self.ends("y") and self.vowel_in_stem():
            self.b[self.k] = "i"

    def first(self, table: dict[str, tuple[tuple[str, str], ...]], at: int) -> None:
        """Replace the first suffix of the table's row for b[at] that the word ends with
        (by r: only where the stem's measure is > 0); the others are not tried."""
        for suffix, repl in table.get(self.b[at], ()):
            if self.ends(suffix):
                self.r(repl)
                return

    def step4(self) -> None:
        for suffix in _STEP4.get(self.b[self.k - 1], ()):
            if self.ends(suffix):
                if suffix == "ion" and not (self.j >= 0 and self.b[self.j] in "st"):
                    continue
                if self.m() > 1:
                    self.k = self.j
                return

    def step5(self) -> None:
        self.j = self.k
        if self.b[self.k] == "e":
            a = self.m()
            if a > 1 or (a == 1 and not self.cvc(self.k - 1)):
                self.k -= 1
        if self.b[self.k] == "l" and self.doublec(self.k) and self.m() > 1:
            self.k -= 1


# Rows by the letter before the last (step 2) or the last letter (step 3), in the C order.
_STEP2 = {
    "a": (("ational", "ate"), ("tional", "tion")),
    "c": (("enci", "ence"), ("anci", "ance")),
    "e": (("izer", "ize"),),
    "l": (("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous")),
    "o": (("ization", "ize"), ("ation", "ate"), ("ator", "ate")),
    "s": (("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous")),
    "t": (("aliti", "al"), ("iviti", "ive"), ("biliti", "ble")),
    "g": (("logi", "log"),),
}
_STEP3 = {
    "e": (("icate", "ic"), ("ative", ""), ("alize", "al")),
    "i": (("iciti", "ic"),),
    "l": (("ical", "ic"), ("ful", "")),
    "s": (("ness", ""),),
}
_STEP4 = {
    "a": ("al",),
    "c": ("ance", "ence"),
    "e": ("er",),
    "i": ("ic",),
    "l": ("able", "ible"),
    "n": ("ant", "ement", "ment", "ent"),
    "o": ("ion", "ou"),
    "s": ("ism",),
    "t": ("ate", "iti"),
    "u": ("ous",),
    "v": ("ive",),
    "z": ("ize",),
}


def stem(word: str) -> str:
    """The Porter stem of a lower-cased word; words of one or two letters stay as they are."""
    if len(word) <= 2:
        return word
    w = _Word(word)
    w.step1ab()
    if w.k > 0:
        w.step1c()
        w.first(_STEP2, w.k - 1)
        w.first(_STEP3, w.k)
        w.step4()
        w.step5()
    return "".join(w.b[: w.k + 1])
