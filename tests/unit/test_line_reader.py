"""`suli index` never stops on one bad line.

Invalid UTF-8, JSON nested past the parser's limit, a BOM, an over-long line, deep or large
structured fields: each line is rejected with its number, its reason and its text, and the
others are indexed, from a file and from stdin alike.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from cli.main import cli
from indexer.pipeline import MAX_LINE_BYTES, Rejection, read_lines
from suli.validate import MAX_STRUCT_BYTES, MAX_STRUCT_DEPTH


def line(item_id: str, **extra: object) -> bytes:
    data = {"id": item_id, "workspace": "ws", "title": f"title {item_id}", **extra}
    return json.dumps(data).encode() + b"\n"


def nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


BAD_UTF8 = b'{"id": "itm_bad", "workspace": "ws", "title": "caf\xe9"}\n'
DEEP_JSON = b'{"id": "itm_deep", "provenance": ' + b"[" * 5000 + b"]" * 5000 + b"}\n"


def mixed_file() -> bytes:
    return b"".join(
        [
            b"\xef\xbb\xbf" + line("itm_1"),  # line 1: a BOM, accepted
            BAD_UTF8,  # 2
            line("itm_2"),  # 3
            DEEP_JSON,  # 4
            line("itm_3", provenance=nested(300)),  # 5
            b"   {oops\n",  # 6
            line("itm_4", url="javascript:alert(1)"),  # 7
            line("itm_5"),  # 8
        ]
    )


def rejects(data: bytes) -> dict[int, Rejection]:
    return {n: e for n, e in read_lines(io.BytesIO(data)) if isinstance(e, Rejection)}


def test_each_bad_line_is_rejected_with_its_number_reason_and_text() -> None:
    entries = list(read_lines(io.BytesIO(mixed_file())))
    ok = [e.id for _, e in entries if not isinstance(e, Rejection)]
    assert ok == ["itm_1", "itm_2", "itm_5"]
    got = {n: e for n, e in entries if isinstance(e, Rejection)}
    assert sorted(got) == [2, 4, 5, 6, 7]
    assert "UTF-8" in got[2].reason and "byte 51" in got[2].reason
    assert got[2].text is not None and "caf\ufffd" in got[2].text  # replacement character
    assert "nest" in got[4].reason and got[4].text is not None
    assert got[5].reason.startswith("provenance") and str(MAX_STRUCT_DEPTH) in got[5].reason
    assert got[5].id == "itm_3"
    assert got[6].text == "   {oops"
    assert got[7].reason.startswith("url") and got[7].id == "itm_4"


def test_json_error_columns_are_1_based_as_the_line_shows_them() -> None:
    # json counts columns from 1; leading spaces are part of the line; a file's BOM is not.
    assert rejects(b'   {"id": }\n')[1].reason.endswith("at column 11")
    assert rejects(b'\xef\xbb\xbf{"id": }\n')[1].reason.endswith("at column 8")
    assert rejects(b'{"id": "x"}\n{"id": }\n')[2].reason.endswith("at column 8")
    # A BOM after line 1 is no file marker: rejected, saying so.
    assert "BOM" in rejects(line("itm_1") + b"\xef\xbb\xbf" + line("itm_2"))[2].reason


def test_a_cut_line_says_so_instead_of_column_1() -> None:
    # Before: json placed the error on the line break, "line 2 column 1" of a one-line text.
    for cut in (b'{"id": "itm_1", "title": "x"', b'{"id": "itm_1",', b'{"id": 12'):
        for end in (b"\n", b"\r\n", b""):
            reason = rejects(cut + end)[1].reason
            assert reason.startswith("invalid JSON: the line ends before the JSON does ("), reason
            assert "column" not in reason


def test_messages_name_a_column_once() -> None:
    reason = rejects(b'{"id": "itm_1", "title": "caf\\u00e9 and more' + b"\n")[1].reason
    assert reason == "invalid JSON: Unterminated string starting at column 26"
    assert rejects(b'{"id": "a\x01"}\n')[1].reason.endswith("character at column 10")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(max_size=6), JSON_VALUES, min_size=1, max_size=4), st.data())
def test_any_cut_of_an_object_is_rejected_with_a_true_place(
    obj: dict[str, object], data: st.DataObject
) -> None:
    whole = json.dumps(obj, ensure_ascii=False)
    cut = whole[: data.draw(st.integers(1, len(whole) - 1))]
    reason = rejects(cut.encode() + b"\n")[1].reason
    assert "at at" not in reason
    if " at column " in reason:
        # A column is a true place on the line: a character the line has, never past its end.
        column = int(reason.rsplit(" ", 1)[1])
        assert 1 <= column <= len(cut), reason
        if "Unterminated string" in reason:  # ... the quote that opens the cut string
            assert cut[column - 1] == '"'
    else:
        assert reason.startswith("invalid JSON: the line ends before the JSON does ("), reason


def test_an_over_long_line_is_rejected_and_reading_goes_on() -> None:
    long = b'{"id": "itm_long", "body": "' + b"x" * (MAX_LINE_BYTES + 10) + b'"}\n'
    entries = list(read_lines(io.BytesIO(line("itm_1") + long + line("itm_2"))))
    assert [n for n, _ in entries] == [1, 2, 3]
    [(_, rej)] = [(n, e) for n, e in entries if isinstance(e, Rejection)]
    assert rej.line == 2 and "longer than" in rej.reason
    assert rej.text is not None and len(rej.text) < MAX_LINE_BYTES  # a prefix is kept


def test_text_streams_still_work() -> None:
    got = list(read_lines(io.StringIO('\ufeff{"id": "itm_1", "workspace": "w", "title": "t"}\n')))
    assert [e.id for _, e in got] == ["itm_1"]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        "SULI_BACKEND": "embedded",
        "SULI_EMBEDDED_PATH": str(tmp_path / "suli.db"),
        "SULI_EMBEDDER": "fake",
        "SULI_HOME": str(tmp_path / "home"),
    }


@pytest.mark.parametrize("source", ["file", "stdin"])
def test_suli_index_rejects_bad_lines_and_indexes_the_rest(
    source: str, env: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "items.jsonl"
    path.write_bytes(mixed_file())
    rejects_path = tmp_path / "bad.jsonl"
    args = ["index", str(path) if source == "file" else "-", "--rejects", str(rejects_path)]
    run = CliRunner().invoke(
        cli, [*args, "--json"], env=env, input=mixed_file() if source == "stdin" else None
    )
    assert run.exit_code == 1, run.output  # some lines were rejected
    body = json.loads(run.stdout)
    assert (body["read"], body["indexed"], body["rejected"]) == (8, 3, 5)
    written = [json.loads(x) for x in rejects_path.read_text().splitlines()]
    assert [r["line"] for r in written] == [2, 4, 5, 6, 7]
    assert all(set(r) == {"line", "id", "reason", "text"} for r in written)
    assert written[3]["text"] == "   {oops"
    # The rejected line is kept as read: it parses back to what was sent.
    assert json.loads(written[4]["text"])["url"] == "javascript:alert(1)"


def test_limits_are_what_the_docs_say() -> None:
    assert (MAX_STRUCT_DEPTH, MAX_STRUCT_BYTES) == (16, 65_536)


def test_numbers_of_any_size_and_nan_end_as_rejections_and_the_run_goes_on(
    env: dict[str, str], tmp_path: Path
) -> None:
    head = '{"id": "itm_%s", "workspace": "ws", "title": "t", '
    rest = ",".join(["0.5"] * 383)
    bad = [
        head % "vec"
        + '"vector_model": "fake-hash-384", "vector": ['
        + str(10**400)
        + ","
        + rest
        + "]}",
        head % "digits" + '"provenance": {"n": ' + "9" * 5000 + "}}",
        head % "nan" + '"provenance": {"n": NaN}}',
        head % "inf" + '"hidden": Infinity}',
    ]
    path = tmp_path / "items.jsonl"
    path.write_bytes(line("itm_1") + "".join(b + "\n" for b in bad).encode() + line("itm_2"))
    run = CliRunner().invoke(cli, ["index", str(path), "--json"], env=env)
    assert run.exit_code == 1, run.output
    body = json.loads(run.stdout)
    assert (body["read"], body["indexed"], body["rejected"], body["stopped"]) == (6, 2, 4, None)
    got = {r["id"]: (r["line"], r["reason"]) for r in body["rejects"]}
    assert got["itm_vec"] == (2, "vector: values must be finite numbers within the float range")
    assert got["itm_digits"][0] == 3 and got["itm_digits"][1].startswith("provenance: numbers")
    assert got["itm_nan"][0] == 4 and got["itm_nan"][1].startswith("provenance: numbers")
    assert got["itm_inf"] == (5, "hidden: Input should be a valid boolean")
    written = Path(str(path) + ".rejects.jsonl").read_text().splitlines()
    assert [json.loads(x)["line"] for x in written] == [2, 3, 4, 5]
