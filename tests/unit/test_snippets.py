"""Best passage and clipping of snippets (HTML-safe)."""

from suli.snippets import best_passage, clip, passages
from suli.text import only_common_words, words


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
