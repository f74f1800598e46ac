"""`suli demo`: a busy port is named with the fix, a "ready on" line, one token reused across
runs, and every printed "Try:" command works exactly as printed."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from cli.main import cli

SULI = str(Path(sys.executable).with_name("suli"))


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SULI_")}
    return {**env, "SULI_HOME": str(tmp_path / "home"), "PYTHONUNBUFFERED": "1"}


def test_busy_port_is_named_with_the_fix(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        db = tmp_path / "demo.db"
        out = CliRunner().invoke(
            cli, ["demo", "--db", str(db), "--port", str(port)], env=_env(tmp_path)
        )
    assert out.exit_code == 2
    assert f"127.0.0.1:{port} is already in use" in out.stderr and "--port" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert not db.exists()  # nothing loaded


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_demo_token_is_reused_and_try_commands_work_as_printed(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    env = _env(tmp_path)
    first = subprocess.run(
        [SULI, "demo", "--db", str(db), "--no-serve"], env=env, capture_output=True, text=True
    )
    assert first.returncode == 0, first.stderr
    token = re.search(r"Token for prn_ana: (\S+)", first.stderr)
    assert token
    # No server was started: no URL of one, and the --url commands are not offered.
    assert "http://127.0.0.1" not in first.stderr and "--url" not in first.stderr
    assert f"{SULI} --backend embedded --db {db} serve --port 8000" in first.stderr

    port = _free_port()
    log = tmp_path / "demo.log"
    with open(log, "w") as sink:
        proc = subprocess.Popen(
            [SULI, "demo", "--db", str(db), "--port", str(port)],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while f"ready on http://127.0.0.1:{port}" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        text = log.read_text()
        assert f"Token for prn_ana: {token.group(1)}" in text  # the same token, not a new one
        tries = text.split("Try:\n", 1)[1].splitlines()
        commands = [ln.strip() for ln in tries if ln.strip().startswith(SULI)]
        assert len(commands) >= 4
        assert any("--url" in c for c in commands) and any("--db" in c for c in commands)
        bare = {k: v for k, v in env.items() if k != "SULI_HOME"}  # as a new shell would have
        for command in commands:
            ran = subprocess.run(shlex.split(command), env=bare, capture_output=True, text=True)
            assert ran.returncode == 0, (command, ran.stderr)
            assert " 1. " in ran.stdout, (command, ran.stdout)
        tokens = subprocess.run(
            [SULI, "--backend", "embedded", "--db", str(db), "token", "list", "--json"],
            env=env,
            capture_output=True,
            text=True,
        )
        assert tokens.stdout.count('"principal": "prn_ana"') == 1
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_unknown_principal_names_the_store(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    out = CliRunner().invoke(
        cli,
        ["--backend", "embedded", "--db", str(db), "search", "x", "--as", "prn_ana"],
        env={**_env(tmp_path), "SULI_EMBEDDER": "fake"},
    )
    assert out.exit_code == 2
    assert f"unknown principal 'prn_ana' (looked in the embedded store {db})" in out.stderr


def test_demo_loads_opensearch_in_one_step(
    tmp_path: Path, opensearch_url: str, make_index_name: Callable[[], str]
) -> None:
    alias = make_index_name()
    # The demo keeps to its own alias (suli-demo-items): a shell's SULI_INDEX_ALIAS is not read
    # (it names the user's own data); the global options before `demo` pick the test's.
    env = {**_env(tmp_path), "SULI_OPENSEARCH_URL": opensearch_url, "SULI_INDEX_ALIAS": "theirs"}
    names = ["--index-alias", alias, "--acl-index", f"{alias}-acl"]
    run = subprocess.run(
        [SULI, *names, "demo", "--backend", "opensearch", "--no-serve"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert f"store the OpenSearch index {alias} at {opensearch_url}" in run.stderr
    tries = run.stderr.split("Try:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    commands = [ln.strip() for ln in tries if ln.strip().startswith(SULI)]
    assert len(commands) == 2 and all("--backend opensearch" in c for c in commands)
    assert all(f"--index-alias {alias} --acl-index {alias}-acl" in c for c in commands)
    # As printed, from a shell that has none of the store's settings.
    bare = {k: v for k, v in env.items() if not k.startswith("SULI_")}
    for command in commands:
        ran = subprocess.run(shlex.split(command), env=bare, capture_output=True, text=True)
        assert ran.returncode == 0, (command, ran.stderr)
        assert " 1. " in ran.stdout, (command, ran.stdout)
    no_url = {k: v for k, v in env.items() if k != "SULI_OPENSEARCH_URL"}
    refused = subprocess.run(
        [SULI, "demo", "--backend", "opensearch", "--no-serve"],
        env=no_url,
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2 and "--opensearch-url" in refused.stderr
