"""The input formats: `suli schema item|principal|board` accept what validation accepts (every
shipped sample passes both, every bad line fails both); the documented samples index cleanly;
`suli export` writes what `suli index` takes back unchanged; `show --json` names its derived
fields."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from cli.main import cli
from cli.schemas import board_schema, item_schema, principal_schema
from indexer.lines import Rejection, Supplied, read_lines
from suli.embedding import MiniLMEmbedder
from suli.errors import InvalidInput
from suli.validate import item_json_schema, parse_acl, parse_item, parse_principal

DOCS = Path(__file__).parents[2] / "docs"
SAMPLE = DOCS / "sample-items.jsonl"

PRINCIPALS = [
    {"id": "prn_ana", "workspace": "ws_acme", "kind": "person", "groups": ["payments"]},
    {"id": "prn_bob", "workspace": "ws_acme", "kind": "person", "groups": []},
]
ACLS = [
    {"board": "brd_payments", "workspace": "ws_acme", "name": "Payments", "groups": ["payments"]}
]

GOOD = {"id": "itm_1", "workspace": "ws", "title": "A title"}
INVALID: list[dict[str, Any]] = [
    {"id": "itm_1", "workspace": "ws"},  # no title
    {**GOOD, "title": "   "},
    {**GOOD, "colour": "red"},  # unknown field
    {**GOOD, "id": "-starts-badly"},
    {**GOOD, "workspace": "x" * 129},
    {**GOOD, "kind": "note"},
    {**GOOD, "outcome": "maybe"},
    {**GOOD, "tags": [""]},
    {**GOOD, "tags": ["x" * 101]},
    {**GOOD, "references": [" "]},
    {**GOOD, "stations": [{"id": "s1"}]},
    {**GOOD, "created_at": "2026-01-31T12:00:00"},  # no offset
    {**GOOD, "created_at": 1769860800},  # a number, not an RFC 3339 string
    {**GOOD, "hidden": "yes"},
    {**GOOD, "hidden": 1},
    {**GOOD, "provenance": ["not", "an", "object"]},
]


MODEL, DIM = MiniLMEmbedder.name, MiniLMEmbedder.dimension
VECTOR = [0.5] * DIM
# Bad lines of each kind: every one must fail the schema and the line reader alike.
BAD_LINES: list[Any] = [
    *INVALID,
    {**GOOD, "vector": VECTOR},  # no vector_model
    {**GOOD, "vector_model": MODEL},  # no vector
    {**GOOD, "vector": VECTOR, "vector_model": "other-model"},
    {**GOOD, "vector": VECTOR[:-1], "vector_model": MODEL},
    {**GOOD, "vector": [*VECTOR, 0.5], "vector_model": MODEL},
    {**GOOD, "vector": [0] * DIM, "vector_model": MODEL},
    {**GOOD, "vector": [0.0] * (DIM - 1) + [-0.0], "vector_model": MODEL},
    {**GOOD, "vector": ["0.5"] * DIM, "vector_model": MODEL},
    {**GOOD, "vector": [True] * DIM, "vector_model": MODEL},
    {**GOOD, "vector": None, "vector_model": MODEL},
    ["not", "an", "object"],
    "a string",
]
GOOD_LINES: list[dict[str, Any]] = [
    GOOD,
    {**GOOD, "vector": VECTOR, "vector_model": MODEL},
    {**GOOD, "vector": [0] * (DIM - 1) + [1e-300], "vector_model": MODEL},  # tiny, not zero
    {**GOOD, "vector": [1] + [0] * (DIM - 1), "vector_model": MODEL},  # ints are numbers
]
BAD_PRINCIPALS: list[Any] = [
    {"id": "prn_a"},
    {"id": "prn_a", "workspace": "ws", "kind": "robot"},
    {"id": "prn_a", "workspace": "ws", "groups": "g"},
    {"id": "prn_a", "workspace": "ws", "groups": [1]},
    {"id": "prn_a", "workspace": "ws", "role": "admin"},
    {"id": "-x", "workspace": "ws"},
    {"id": "prn_a", "workspace": "w" * 129},
    {"id": 7, "workspace": "ws"},
]
BAD_BOARDS: list[Any] = [
    {"board": "brd_x"},
    {"board": "brd_x", "workspace": "ws", "members": "prn_a"},
    {"board": "brd_x", "workspace": "ws", "name": "n" * 201},
    {"board": "brd x", "workspace": "ws"},
    {"board": "brd_x", "workspace": "ws", "owner": "prn_a"},
    {"board": "brd_x", "workspace": "ws", "groups": [None]},
]


def _check(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _validator() -> jsonschema.protocols.Validator:
    return _check(item_schema(MODEL, DIM))


def _reader_accepts(data: Any) -> bool:
    """What `suli index` does with the line: parsed, validated, its own vector checked."""
    supplied: dict[int, Supplied] = {}
    [(n, entry)] = list(read_lines(io.BytesIO(json.dumps(data).encode() + b"\n"), None, supplied))
    if isinstance(entry, Rejection):
        return False
    return n not in supplied or not isinstance(supplied[n].check(MODEL, DIM), str)


def _sample() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]


def test_cli_prints_the_schemas() -> None:
    env = {"SULI_EMBEDDER": "minilm"}
    out = CliRunner().invoke(cli, ["schema", "item"], env=env)
    assert out.exit_code == 0
    assert json.loads(out.stdout) == item_schema(MODEL, DIM)
    fake = CliRunner().invoke(cli, ["schema", "item"], env={"SULI_EMBEDDER": "fake"})
    assert json.loads(fake.stdout)["properties"]["vector_model"]["const"] == "fake-hash-384"
    for name, schema in (("principal", principal_schema()), ("board", board_schema())):
        out = CliRunner().invoke(cli, ["schema", name])
        assert out.exit_code == 0 and json.loads(out.stdout) == schema


def test_the_item_schema_is_the_validators_plus_the_vector_fields() -> None:
    full = item_schema(MODEL, DIM)
    assert set(full["properties"]) == set(item_json_schema()["properties"]) | {
        "vector",
        "vector_model",
    }
    assert full["additionalProperties"] is False


def test_sample_validates_against_the_schema_and_the_validator() -> None:
    v = _validator()
    items = _sample()
    assert len(items) >= 5
    for data in items:
        v.validate(data)
        parse_item(data)
        assert _reader_accepts(data)
    text = (DOCS / "items.md").read_text()
    documented = {f.strip("`") for f in text.split("|")}
    for field in item_schema(MODEL, DIM)["properties"]:
        assert field in documented or f"`{field}`" in text, field


@pytest.mark.parametrize("data", GOOD_LINES, ids=lambda d: json.dumps(d)[:60])
def test_good_lines_pass_both(data: dict[str, Any]) -> None:
    assert _validator().is_valid(data)
    assert _reader_accepts(data)


@pytest.mark.parametrize("data", INVALID, ids=lambda d: json.dumps(d)[:60])
def test_invalid_items_fail_both(data: dict[str, Any]) -> None:
    assert not _validator().is_valid(data)
    with pytest.raises(InvalidInput):
        parse_item(data)


@pytest.mark.parametrize("data", BAD_LINES, ids=lambda d: json.dumps(d)[:70])
def test_bad_lines_fail_the_schema_and_the_line_reader(data: Any) -> None:
    assert not _validator().is_valid(data)
    assert not _reader_accepts(data)


def test_sample_principals_and_boards_pass_both_and_fit_the_items() -> None:
    principals = json.loads((DOCS / "sample-principals.json").read_text())
    boards = json.loads((DOCS / "sample-boards.json").read_text())
    pv, bv = _check(principal_schema()), _check(board_schema())
    for p in principals:
        pv.validate(p)
        parse_principal(p)
    for b in boards:
        bv.validate(b)
        parse_acl(b)
    items = _sample()
    ids = {p["id"] for p in principals}
    assert {i["board"] for i in items if i.get("board")} <= {b["board"] for b in boards}
    assert {i[k] for i in items for k in ("agent", "uploader") if i.get(k)} <= ids
    assert {i["workspace"] for i in items} == {p["workspace"] for p in principals}
    # Someone on the board and someone not: the samples show the rule, not just the data.
    on_board = [
        p["id"]
        for p in principals
        if any(p["id"] in b["members"] or set(p["groups"]) & set(b["groups"]) for b in boards)
    ]
    assert "prn_ana" in on_board and set(ids) - set(on_board)


@pytest.mark.parametrize(
    ("schema", "parse", "data"),
    [(principal_schema, parse_principal, d) for d in BAD_PRINCIPALS]
    + [(board_schema, parse_acl, d) for d in BAD_BOARDS],
    ids=lambda x: json.dumps(x)[:50] if isinstance(x, dict) else "",
)
def test_bad_principals_and_boards_fail_both(schema: Any, parse: Any, data: Any) -> None:
    assert not _check(schema()).is_valid(data)
    with pytest.raises(InvalidInput):
        parse(data)


def suli(home: Path, db: Path, *args: str, input: str | None = None) -> Any:
    env = {"SULI_HOME": str(home), "SULI_EMBEDDER": "fake", "SULI_BACKEND": ""}
    return CliRunner().invoke(
        cli, ["--backend", "embedded", "--db", str(db), *args], env=env, input=input
    )


def _load(tmp_path: Path, db: Path, items: Path) -> None:
    (tmp_path / "p.json").write_text(json.dumps(PRINCIPALS))
    (tmp_path / "a.json").write_text(json.dumps(ACLS))
    assert suli(tmp_path, db, "principal", "load", str(tmp_path / "p.json")).exit_code == 0
    assert suli(tmp_path, db, "acl", "load", str(tmp_path / "a.json")).exit_code == 0
    out = suli(tmp_path, db, "index", str(items), "--json")
    assert out.exit_code == 0, out.output
    summary = json.loads(out.stdout)
    assert summary["rejected"] == 0, summary


def _results(tmp_path: Path, db: Path) -> list[list[tuple[str, float]]]:
    got = []
    for who in ("prn_ana", "prn_bob"):
        for query in (["deploy"], ["canary", "budget"], [], ["architecture"]):
            out = suli(tmp_path, db, "search", *query, "--as", who, "--hidden", "--json")
            assert out.exit_code == 0, out.output
            got.append([(r["id"], r["score"]) for r in json.loads(out.stdout)["results"]])
    return got


def test_export_then_index_into_an_empty_store_round_trips(tmp_path: Path) -> None:
    first, second = tmp_path / "first.db", tmp_path / "second.db"
    _load(tmp_path, first, SAMPLE)
    exported = tmp_path / "export.jsonl"
    out = suli(tmp_path, first, "export", str(exported))
    assert out.exit_code == 0 and "exported 5 items" in out.stderr
    lines = exported.read_text().splitlines()
    assert [json.loads(x)["id"] for x in lines] == sorted(d["id"] for d in _sample())
    _load(tmp_path, second, exported)
    again = suli(tmp_path, second, "export").stdout.splitlines()
    assert again == lines  # unchanged
    assert _results(tmp_path, second) == _results(tmp_path, first)
    assert any(_results(tmp_path, first))


def test_show_json_names_derived_fields(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    _load(tmp_path, db, SAMPLE)
    out = suli(tmp_path, db, "show", "itm_deploy_checklist", "--as", "prn_ana", "--json")
    body = json.loads(out.stdout)
    assert body["derived"] == ["scope", "superseded"]
    assert body["scope"] == "board" and body["superseded"] is False
    # Derived fields are output only: the schema refuses them as input.
    assert not _validator().is_valid({**GOOD, "scope": "board"})
