"""The README's first command works on a fresh clone with nothing but Python, and the
"Using it" commands after it work as written.

It runs the command exactly as the README states it, in a fresh `git clone` with a fresh venv
and an empty HOME, then queries the demo over HTTP with the token it printed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    assert block, "README has no bash block at the top"
    return [ln for ln in block.group(1).splitlines() if ln.strip() and not ln.startswith("#")]


def test_readme_has_exactly_two_setup_commands() -> None:
    cmds = readme_commands()
    assert len(cmds) == 2
    assert cmds[0].endswith("suli demo")
    assert cmds[1].endswith(".venv/bin/pytest")
    assert ".venv/bin/pytest" in (REPO / ".ci" / "run").read_text()  # CI runs the README's tests


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_first_command_on_a_fresh_clone(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    port = free_port()
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")),
        "SULI_DEMO_PORT": str(port),
        "PYTHONUNBUFFERED": "1",
    }
    log = tmp_path / "demo.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            ["bash", "-c", readme_commands()[0]],
            cwd=clone,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        token = None
        deadline = time.monotonic() + 900  # pip install from the local cache, then loading
        while time.monotonic() < deadline and proc.poll() is None:
            m = re.search(r"Token for \S+: (\S+)", log.read_text())
            if m:
                token = m.group(1)
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5)
                    break
                except OSError:
                    pass
            time.sleep(2)
        assert token, f"the demo printed no token; log:\n{log.read_text()[-3000:]}"
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/v1/search?q=deploy+checklist",
            headers={"Authorization": f"Bearer {token}"},
        )
        body = json.load(urllib.request.urlopen(req, timeout=60))
        assert body["results"], body
        assert any("deploy" in r["title"].lower() for r in body["results"][:3])
        assert all(r["scope"] != "personal" or r.get("board") is None for r in body["results"])
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def using_it_commands() -> list[str]:
    """The first block of "Using it": the commands on the embedded store, in order."""
    section = (REPO / "README.md").read_text().split("## Using it", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block
    return [ln for ln in block.group(1).splitlines() if ln.strip() and not ln.startswith("#")]


def test_using_it_works_after_the_demo(tmp_path: Path) -> None:
    """From `suli demo` on, every command of "Using it" exits 0 in a shell with only HOME."""
    home = tmp_path / "home"
    home.mkdir()
    bindir = Path(sys.executable).parent
    env = {"PATH": f"{bindir}:{os.environ['PATH']}", "HOME": str(home)}
    demo = subprocess.run(
        ["suli", "demo", "--no-serve"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert demo.returncode == 0, demo.stderr
    commands = using_it_commands()
    assert commands[0].startswith("suli --db ~/.local/share/suli/demo.db search")
    outputs = {}
    for command in commands:
        ran = subprocess.run(
            ["bash", "-c", command], cwd=REPO, env=env, capture_output=True, text=True
        )
        assert ran.returncode == 0, (command, ran.stderr)
        outputs[command] = ran.stdout
    # The documented files themselves (run from the repository, as a clone would).
    assert any("itm_deploy_checklist" in out for out in outputs.values()), outputs
    ben = next(c for c in commands if "--as prn_ben" in c)
    assert "No results." in outputs[ben]
    why = next(c for c in commands if c.startswith("suli access") and "--as prn_ben" in c)
    assert "not visible: board brd_payments lists neither prn_ben" in outputs[why]
    evaluated = next(c for c in commands if c.startswith("suli eval"))
    assert "3 queries" in outputs[evaluated]


def readme_blocks() -> list[list[str]]:
    """Every fenced bash block of the README, as its command lines."""
    blocks = re.findall(r"```bash\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    return [[ln for ln in b.splitlines() if ln.strip() and not ln.startswith("#")] for b in blocks]


# Each README block, by its first command: the test here that runs it as written, or why no
# test can (every command of every block is still parsed by tests/unit/test_docs.py).
RUN_BY = {
    "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/suli demo": (
        "test_first_command_on_a_fresh_clone"
    ),
    "suli --db ~/.local/share/suli/demo.db search deploy checklist --as prn_ana   # the demo's store": (
        "test_using_it_works_after_the_demo"
    ),
}
NOT_RUN = {
    "suli cluster up                      # a local OpenSearch node on 127.0.0.1:9200 (--nodes 3 for a cluster)": (
        "starts a JVM and writes the demo's alias on the node; the demo on OpenSearch runs as "
        "printed in tests/e2e/test_demo.py::test_demo_loads_opensearch_in_one_step"
    ),
    "sudo sysctl -w vm.max_map_count=262144    # OpenSearch needs it on the Docker host (Linux)": (
        "needs Docker and root; the compose file and its settings: tests/unit/test_deploy_files.py"
    ),
    "make test        # everything (starts OpenSearch if SULI_TEST_OPENSEARCH_URL is unset)": (
        "the test suite itself"
    ),
}


def test_every_readme_block_is_run_by_a_test_or_says_why_not() -> None:
    firsts = [block[0] for block in readme_blocks()]
    assert sorted(firsts) == sorted([*RUN_BY, *NOT_RUN]), firsts
    for test in RUN_BY.values():
        assert callable(globals().get(test)), test
    # The "Using it" test runs the whole block, the access lines included.
    using = using_it_commands()
    assert using == readme_blocks()[1] and any(c.startswith("suli access") for c in using)
