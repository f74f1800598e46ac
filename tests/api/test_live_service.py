"""Through a listening service: `suli search --url` prints what local search prints; `suli serve`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from click.testing import CliRunner

from app.main import create_app
from cli.main import cli

from .helpers import World, opener


@pytest.fixture(scope="module")
def live_url(world: World) -> Iterator[str]:
    """The app under a real uvicorn server on a free port, in a thread of this process."""
    config = uvicorn.Config(
        create_app(world.settings, opener=opener()), host="127.0.0.1", port=0, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(30)


def env_for(world: World, home: Path) -> dict[str, str]:
    s = world.settings
    return {
        "SULI_BACKEND": "opensearch",
        "SULI_OPENSEARCH_URL": str(s.opensearch_url),
        "SULI_INDEX_ALIAS": s.index_alias,
        "SULI_ACL_INDEX": s.acl_index,
        "SULI_EMBEDDER": "fake",
        "SULI_HOME": str(home),
    }


def run(args: list[str], env: dict[str, str]) -> Any:
    return CliRunner().invoke(cli, args, env=env, catch_exceptions=False)


ARGS = [
    ["search", "deploy", "guide", "--limit", "5"],
    ["search", "--outcome", "approved,completed", "--explain"],
    ["search"],
]


@pytest.mark.parametrize("args", ARGS)
def test_remote_search_prints_the_same_as_local(
    world: World, live_url: str, tmp_path: Path, args: list[str]
) -> None:
    env = env_for(world, tmp_path)
    token = world.tokens["ana"]
    local_json = run([*args, "--as", "prn_ana", "--json"], env)
    remote_json = run([*args, "--url", live_url, "--token", token, "--json"], env)
    assert local_json.exit_code == remote_json.exit_code == 0, remote_json.output
    local, remote = json.loads(local_json.stdout), json.loads(remote_json.stdout)
    assert local["results"]
    local.pop("timings_ms")
    remote.pop("timings_ms")
    # Cursors are signed with each side's own secret (the service's, this home's).
    assert bool(local.pop("next")) == bool(remote.pop("next")) == local["has_more"]
    assert remote == local

    local_human = run([*args, "--as", "prn_ana"], env)
    remote_human = run([*args, "--url", live_url, "--token", token], env)
    assert remote_human.stdout == local_human.stdout
    assert "matches" in remote_human.stderr


def test_remote_errors_keep_their_exit_codes(world: World, live_url: str, tmp_path: Path) -> None:
    env = env_for(world, tmp_path)
    bad_input = run(
        ["search", "x", "--limit", "0", "--url", live_url, "--token", world.tokens["ana"]], env
    )
    assert bad_input.exit_code == 2
    assert "limit" in bad_input.stderr
    bad_token = run(["search", "x", "--url", live_url, "--token", "suli_wrong"], env)
    assert bad_token.exit_code == 1
    assert "token" in bad_token.stderr
    no_token = run(["search", "x", "--url", live_url], {**env, "SULI_TOKEN": ""})
    assert no_token.exit_code == 2
    nobody = run(["search", "x"], {**env, "SULI_PRINCIPAL": ""})
    assert nobody.exit_code == 2
    assert "--as" in nobody.stderr


def test_suli_serve_runs_the_service(world: World, tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, **env_for(world, tmp_path)}
    suli = Path(sys.executable).with_name("suli")
    proc = subprocess.Popen(
        [str(suli), "serve", "--port", str(port), "--log-level", "warning"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        ready = _wait_ready(url, proc)
        assert ready.json() == {"status": "ready"}
        r = httpx.get(
            f"{url}/api/v1/search",
            params={"q": "deploy"},
            headers={"Authorization": f"Bearer {world.tokens['bob']}"},
        )
        assert r.status_code == 200
        assert "itm_secret" in [x["id"] for x in r.json()["results"]]
        assert "server-timing" in r.headers
    finally:
        proc.terminate()
        proc.wait(30)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(url: str, proc: subprocess.Popen[bytes]) -> httpx.Response:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(
                f"suli serve exited: {proc.stderr.read().decode() if proc.stderr else ''}"
            )
        try:
            r = httpx.get(f"{url}/readyz", timeout=5)
            if r.status_code == 200:
                return r
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("suli serve did not become ready")


READS = [
    ["show", "itm_checklist"],
    ["related", "itm_checklist", "--limit", "5"],
    ["related", "--title", "Roll back a deploy", "--spec", "checklist", "--ref", "itm_rollback"],
    ["facets"],
    ["facets", "--outcome", "approved,completed", "--tag", "deploy"],
]


@pytest.mark.parametrize("args", READS, ids=" ".join)
def test_every_read_command_asks_a_running_service(
    world: World, live_url: str, tmp_path: Path, args: list[str]
) -> None:
    env = {**env_for(world, tmp_path), "SULI_PRINCIPAL": ""}
    token = world.tokens["ana"]
    local = run([*args, "--as", "prn_ana", "--json"], env)
    # SULI_URL/SULI_TOKEN, as a user would export them.
    remote = run([*args, "--json"], {**env, "SULI_URL": live_url, "SULI_TOKEN": token})
    assert local.exit_code == remote.exit_code == 0, remote.output
    mine, theirs = json.loads(local.stdout), json.loads(remote.stdout)
    mine.pop("timings_ms", None)
    theirs.pop("timings_ms", None)
    assert theirs == mine
    assert (
        run([*args, "--url", live_url, "--token", token], env).stdout
        == run([*args, "--as", "prn_ana"], env).stdout
    )


def test_remote_show_of_an_invisible_item_is_not_found(
    world: World, live_url: str, tmp_path: Path
) -> None:
    env = env_for(world, tmp_path)
    out = run(["show", "itm_secret", "--url", live_url, "--token", world.tokens["ana"]], env)
    assert out.exit_code == 1
    assert "itm_secret" not in out.stdout
    no_as = run(["show", "itm_checklist"], {**env, "SULI_PRINCIPAL": "", "SULI_URL": ""})
    assert no_as.exit_code == 2 and "--as" in no_as.stderr


def test_admin_lists_on_opensearch(world: World, tmp_path: Path) -> None:
    env = env_for(world, tmp_path)
    principals = json.loads(run(["principal", "list", "--json"], env).stdout)
    assert "prn_ana" in [p["id"] for p in principals]
    assert [p["id"] for p in principals] == sorted(p["id"] for p in principals)
    boards = json.loads(run(["acl", "list", "--json"], env).stdout)
    assert boards and all(b["board"] and b["workspace"] for b in boards)
    tokens = json.loads(run(["token", "list", "--json"], env).stdout)
    assert len(tokens) >= len(world.tokens) and all(len(t["hash"]) == 64 for t in tokens)
    assert not {t["hash"] for t in tokens} & set(world.tokens.values())


def test_export_on_opensearch_writes_every_item_as_index_input(
    world: World, tmp_path: Path
) -> None:
    from suli.validate import parse_item

    env = env_for(world, tmp_path)
    out = run(["export"], env)
    assert out.exit_code == 0, out.output
    rows = [json.loads(x) for x in out.stdout.splitlines()]
    ids = [r["id"] for r in rows]
    keys = [(r["workspace"], r["id"]) for r in rows]
    assert keys == sorted(keys) and "itm_secret" in ids and "itm_hidden" in ids  # all items
    assert all(parse_item(r).id == r["id"] for r in rows)
    assert f"exported {len(rows)} items from the OpenSearch index" in out.stderr


def test_pages_and_facets_locally_and_remotely(world: World, live_url: str, tmp_path: Path) -> None:
    env = env_for(world, tmp_path)
    remote = ["--url", live_url, "--token", world.tokens["ana"]]
    whole = json.loads(
        run(["search", "deploy", "--limit", "25", "--as", "prn_ana", "--json"], env).stdout
    )
    want = [r["id"] for r in whole["results"]]
    assert len(want) >= 3
    for where in (["--as", "prn_ana"], remote):
        got = json.loads(
            run(["search", "deploy", "--limit", "1", "--page", "2", *where, "--json"], env).stdout
        )
        assert [r["id"] for r in got["results"]] == want[1:2] and got["offset"] == 1
        human = run(["search", "deploy", "--limit", "1", "--page", "2", *where], env)
        assert f"-- {whole['total']} matches; showing 2-2; more: --page 3" in human.stderr
        last = run(["search", "deploy", "--limit", "25", "--page", "2", *where], env)
        assert last.exit_code == 0 and "No more results." in last.stdout
        bad = run(["search", "deploy", "--page", "0", *where], env)
        assert bad.exit_code == 2 and "page" in bad.stderr
    # a remote cursor pages remotely; locally (another secret) it is refused, naming cursor
    first = json.loads(run(["search", "deploy", "--limit", "1", *remote, "--json"], env).stdout)
    nxt = run(
        ["search", "deploy", "--limit", "1", "--cursor", first["next"], *remote, "--json"], env
    )
    assert [r["id"] for r in json.loads(nxt.stdout)["results"]] == want[1:2]
    refused = run(["search", "deploy", "--cursor", first["next"], "--as", "prn_ana"], env)
    assert refused.exit_code == 2 and "cursor" in refused.stderr
    # nonsense finds nothing, and --explain says why
    nothing = run(["search", "zxqv", "plorbnak", "quuxifrage", "--as", "prn_ana", "--explain"], env)
    assert nothing.exit_code == 0 and "No results." in nothing.stdout
    assert "meaning-below-floor" in nothing.stdout and "-- 0 matches" in nothing.stderr
    # facets follow the words and list every value
    facets = run(["facets", "deploy", "--as", "prn_ana"], env)
    assert facets.exit_code == 0 and f"{whole['total']} matching items" in facets.stdout
    every = json.loads(run(["facets", "deploy", "--as", "prn_ana", "--json"], env).stdout)
    assert every["total"] == whole["total"]
    assert sum(v["count"] for v in every["facets"]["kind"]) == whole["total"]
