"""`suli access ITEM [--as P]` through Click's runner on the embedded store: the rule that
decides, said in one line; everyone who may see an item, by rule; exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.main import cli

WS, OTHER = "ws_acme", "ws_globex"
PRINCIPALS = [
    {"id": "prn_ana", "workspace": WS, "kind": "person", "groups": ["grp_ops"]},
    {"id": "prn_ben", "workspace": WS, "kind": "person", "groups": ["grp_eng"]},
    {"id": "prn_cho", "workspace": WS, "kind": "person", "groups": []},
    {"id": "prn_eve", "workspace": OTHER, "kind": "person", "groups": ["grp_ops"]},
]
ACLS = [
    {"board": "brd_payments", "workspace": WS, "name": "Payments", "members": [], "groups": ["grp_ops"]},
    {"board": "brd_legal", "workspace": WS, "name": "Legal", "members": ["prn_cho"], "groups": []},
]  # fmt: skip


def _item(item_id: str, title: str, **fields: Any) -> dict[str, Any]:
    return {"id": item_id, "workspace": WS, "title": title, "body": f"{title} text", **fields}


ITEMS = [
    _item("itm_pay", "Payments runbook", board="brd_payments"),
    _item("itm_legal", "Legal review", board="brd_legal"),
    _item("itm_mine", "Cho's notes", uploader="prn_cho"),
    _item("itm_draft", "Hidden draft", hidden=True),
    _item("itm_old", "Old legal memo", superseded_by="itm_legal"),
    _item("itm_glob", "Globex plan", workspace=OTHER),
]


def suli(home: Path, *args: str) -> tuple[int, str, str]:
    env = {"SULI_HOME": str(home / "home"), "SULI_EMBEDDER": "fake", "SULI_BACKEND": ""}
    r = CliRunner().invoke(cli, ["--backend", "embedded", *args], env=env)
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("access")
    (d / "p.json").write_text(json.dumps(PRINCIPALS))
    (d / "a.json").write_text(json.dumps(ACLS))
    (d / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    assert suli(d, "principal", "load", str(d / "p.json"))[0] == 0
    assert suli(d, "acl", "load", str(d / "a.json"))[0] == 0
    assert suli(d, "index", str(d / "items.jsonl"))[0] == 0
    return d


def test_visible_through_a_group(home: Path) -> None:
    code, out, _ = suli(home, "access", "itm_pay", "--as", "prn_ana")
    assert code == 0
    assert "visible: board brd_payments lists group grp_ops, which prn_ana holds" in out
    assert "search: prn_ana's searches show it when it matches" in out


def test_not_visible_board_lists_neither(home: Path) -> None:
    code, out, _ = suli(home, "access", "itm_legal", "--as", "prn_ben")
    assert code == 0  # an answer, not a failure
    assert (
        "not visible: board brd_legal lists neither prn_ben nor any of their groups (grp_eng)"
        in out
    )
    assert "never shown to prn_ben" in out


def test_not_visible_personal_upload_of_another(home: Path) -> None:
    out = suli(home, "access", "itm_mine", "--as", "prn_ana")[1]
    assert "not visible: personal upload of prn_cho" in out


def test_hidden_says_when_it_is_shown(home: Path) -> None:
    out = suli(home, "access", "itm_draft", "--as", "prn_ben")[1]
    assert "visible: workspace-wide in ws_acme" in out
    assert "hidden: shown only when hidden items are asked for" in out


def test_superseded_says_whether_results_name_the_replacement(home: Path) -> None:
    out = suli(home, "access", "itm_old", "--as", "prn_ana")[1]
    assert "superseded by itm_legal, which prn_ana may not see" in out
    out = suli(home, "access", "itm_old", "--as", "prn_cho")[1]
    assert "superseded by itm_legal, which prn_cho may see: results name it" in out


def test_another_workspace(home: Path) -> None:
    code, out, _ = suli(home, "access", "itm_glob", "--as", "prn_ana")
    assert code == 0
    assert "not visible: the item is in workspace ws_globex, prn_ana in ws_acme" in out


def test_everyone_who_may_see_it_grouped_by_rule(home: Path) -> None:
    code, out, _ = suli(home, "access", "itm_pay")
    assert code == 0
    assert "through a group: 1\n  prn_ana (via grp_ops)\n" in out
    assert "prn_eve" not in out and "prn_ben" not in out  # another workspace's grp_ops
    code, out, _ = suli(home, "access", "itm_draft", "--json")
    body = json.loads(out)
    assert {r["principal"] for r in body["audience"]} == {"prn_ana", "prn_ben", "prn_cho"}
    assert {r["search"] for r in body["audience"]} == {"hidden"}


def test_json_is_the_api_body(home: Path) -> None:
    body = json.loads(suli(home, "access", "itm_legal", "--as", "prn_cho", "--json")[1])
    assert (body["visible"], body["rule"], body["search"]) == (True, "board-member", "shown")
    assert body["item"]["id"] == "itm_legal" and body["item"]["board"] == "brd_legal"


def test_missing_item_and_unknown_principal(home: Path) -> None:
    code, _, err = suli(home, "access", "itm_nobody", "--as", "prn_ana")
    assert code == 1 and "no item 'itm_nobody' in workspace ws_acme" in err
    code, _, err = suli(home, "access", "itm_pay", "--as", "prn_nobody")
    assert code == 2 and "unknown principal 'prn_nobody'" in err
    code, _, err = suli(home, "access", "itm_nobody")
    assert code == 2 and "--workspace" in err
    code, _, err = suli(home, "access", " ")
    assert code == 2 and "item_id: must not be empty" in err
