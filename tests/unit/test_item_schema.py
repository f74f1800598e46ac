"""The item format: `suli schema item` accepts what validation accepts; the documented sample
indexes cleanly; `suli export` writes what `suli index` takes back unchanged; `show --json`
names its derived fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from cli.main import cli
from suli.errors import InvalidInput
from suli.validate import item_json_schema, parse_item

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


def _validator() -> jsonschema.protocols.Validator:
    schema = item_json_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _sample() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]


def test_cli_prints_the_schema() -> None:
    out = CliRunner().invoke(cli, ["schema", "item"])
    assert out.exit_code == 0
    assert json.loads(out.stdout) == item_json_schema()


def test_sample_validates_against_the_schema_and_the_validator() -> None:
    v = _validator()
    items = _sample()
    assert len(items) >= 5
    for data in items:
        v.validate(data)
        parse_item(data)
    documented = {f.strip("`") for f in (DOCS / "items.md").read_text().split("|")}
    for field in item_json_schema()["properties"]:
        assert field in documented or f"`{field}`" in (DOCS / "items.md").read_text(), field


@pytest.mark.parametrize("data", INVALID, ids=lambda d: json.dumps(d)[:60])
def test_invalid_items_fail_both(data: dict[str, Any]) -> None:
    assert not _validator().is_valid(data)
    with pytest.raises(InvalidInput):
        parse_item(data)


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
