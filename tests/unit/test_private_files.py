"""Files holding item data are the owner's only (0600), whatever the umask: exports, rejects
files, the vector cache and the embedded store. `suli export --workspace` exports one tenant.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from suli.files import open_private


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o022, 0o000, 0o077])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        "SULI_BACKEND": "embedded",
        "SULI_EMBEDDED_PATH": str(tmp_path / "store" / "suli.db"),
        "SULI_EMBEDDER": "fake",
        "SULI_HOME": str(tmp_path / "home"),
        "SULI_VECTOR_CACHE": str(tmp_path / "cache" / "vectors.sqlite"),
    }


def item(item_id: str, workspace: str, **extra: object) -> str:
    return json.dumps({"id": item_id, "workspace": workspace, "title": f"t {item_id}", **extra})


ITEMS = [
    item("itm_a", "ws_a"),
    item("itm_b", "ws_b", uploader="prn_bob"),  # a personal upload
    item("itm_c", "ws_a", hidden=True),
    item("itm_d", "ws_c"),
    '{"id": "itm_bad", "workspace": "ws_a", "title": "secret words", "kind": "nope"}',
]


def test_item_data_files_are_created_0600(umask: int, env: dict[str, str], tmp_path: Path) -> None:
    src = tmp_path / "items.jsonl"
    src.write_text("\n".join(ITEMS) + "\n")
    run = CliRunner().invoke(cli, ["index", "--workers", "0", str(src)], env=env)
    assert run.exit_code == 1, run.output  # one line rejected
    store = Path(env["SULI_EMBEDDED_PATH"])
    rejects = Path(str(src) + ".rejects.jsonl")
    cache = Path(env["SULI_VECTOR_CACHE"])
    assert "secret words" in rejects.read_text()  # the line's text: item data
    for path in (store, rejects, cache):
        assert mode(path) == 0o600, (path, oct(mode(path)))
    # SQLite's side files take the database file's mode.
    for side in (*store.parent.glob("suli.db-*"), *cache.parent.glob("vectors.sqlite-*")):
        assert mode(side) == 0o600, (side, oct(mode(side)))

    out = tmp_path / "export.jsonl"
    out.write_text("")
    out.chmod(0o644)  # an older export: what is written now is item data all the same
    run = CliRunner().invoke(cli, ["export", str(out)], env=env)
    assert run.exit_code == 0, run.output
    assert mode(out) == 0o600
    assert len(out.read_text().splitlines()) == 4


def test_export_of_one_workspace_holds_only_its_items(env: dict[str, str], tmp_path: Path) -> None:
    src = tmp_path / "items.jsonl"
    src.write_text("\n".join(ITEMS[:4]) + "\n")
    assert CliRunner().invoke(cli, ["index", "--workers", "0", str(src)], env=env).exit_code == 0

    def exported(*args: str) -> list[tuple[str, str]]:
        run = CliRunner().invoke(cli, ["export", *args], env=env)
        assert run.exit_code == 0, run.output
        rows = [json.loads(x) for x in run.stdout.splitlines()]
        return sorted((r["workspace"], r["id"]) for r in rows)

    assert exported("--workspace", "ws_a") == [("ws_a", "itm_a"), ("ws_a", "itm_c")]
    assert exported("-w", "ws_b", "-w", "ws_c") == [("ws_b", "itm_b"), ("ws_c", "itm_d")]
    assert exported("-w", "ws_none") == []
    assert len(exported()) == 4  # no option: every workspace, as before
    bad = CliRunner().invoke(cli, ["export", "-w", " "], env=env)
    assert bad.exit_code == 2 and "workspace" in bad.output


def test_open_private_sets_0600_on_a_new_and_an_old_file(umask: int, tmp_path: Path) -> None:
    new, old = tmp_path / "new.txt", tmp_path / "old.txt"
    old.write_text("before")
    old.chmod(0o666)
    for path in (new, old):
        with open_private(path) as f:
            f.write("after")
        assert (mode(path), path.read_text()) == (0o600, "after")
