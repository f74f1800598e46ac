"""`suli delete`: ids are per workspace, so the command names the workspace and says which of
the ids it did not find."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from cli.main import cli
from suli.backends.embedded import EmbeddedBackend
from suli.embedding import FakeEmbedder
from suli.visibility import Visibility


def test_delete_removes_one_workspaces_item_and_reports_missing_ids(tmp_path: Path) -> None:
    env = {"SULI_BACKEND": "embedded", "SULI_EMBEDDED_PATH": str(tmp_path / "s.db"),
           "SULI_EMBEDDER": "fake", "SULI_HOME": str(tmp_path)}  # fmt: skip
    lines = [{"id": "itm_1", "workspace": ws, "title": f"note of {ws}"} for ws in ("ws_a", "ws_b")]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))

    def suli(*args: str) -> tuple[int, str]:
        r = CliRunner().invoke(cli, list(args), env=env)
        return r.exit_code, r.stdout + r.stderr

    assert suli("index", str(tmp_path / "items.jsonl"))[0] == 0  # two items, one id
    code, out = suli("delete", "itm_1")
    assert code == 2 and "--workspace" in out  # which workspace's itm_1: never guessed
    code, out = suli("delete", "itm_1", "itm_9", "-w", "ws_a", "--json")
    assert code == 1  # itm_9 was not found: not a silent success
    assert json.loads(out) == {"deleted": ["itm_1"], "missing": ["itm_9"], "failed": {}}
    store = EmbeddedBackend(tmp_path / "s.db", FakeEmbedder().dimension)
    try:
        assert store.count() == 1
        left = store.get_many(Visibility("ws_b", "prn_x", frozenset()), ["itm_1"])
        assert left["itm_1"].title == "note of ws_b"
    finally:
        store.close()
