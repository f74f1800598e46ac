"""Start, identify and stop node JVMs by pid, with stale pid files and zombies handled."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

from devcluster.lines import MAIN_CLASSES

_MAIN_ARGS = {name.encode() for name in MAIN_CLASSES}

# Children started by this Python process: polling them reaps them, so a killed node does
# not linger as a zombie that still answers kill(pid, 0) while a test session runs on.
_children: dict[int, subprocess.Popen[bytes]] = {}


def spawn(cmd: list[str], home: Path, log_path: Path) -> int:
    """Start one node JVM in its own session (it outlives the CLI) with output to log_path."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        log.write(f"\n=== {stamp} starting: {' '.join(cmd)}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            cmd,
            cwd=home,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _children[proc.pid] = proc
    return proc.pid


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The state letter follows the parenthesised command name, which may contain spaces.
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def alive(pid: int) -> bool:
    """True while the process runs (a zombie counts as dead)."""
    child = _children.get(pid)
    if child is not None:
        if child.poll() is None:
            return True
        del _children[pid]  # reaped: the pid may be reused by another process from now on
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def is_node(pid: int, home: Path) -> bool:
    """True when pid is alive and is the OsNode (or OsNode3) JVM of this node home (not a
    reused pid)."""
    if not alive(pid):
        return False
    if pid in _children:  # a running child of ours (alive() dropped it if it exited): the
        return True  # JVM launcher may re-exec itself, and mid-exec its argv reads empty
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True  # no /proc (not Linux): trust the pid file
    return bool(_MAIN_ARGS.intersection(argv)) and str(home).encode() in argv


def find_nodes(under: Path) -> list[int]:
    """Pids of OsNode JVMs whose node home lies under `under` (finds nodes with lost pid files)."""
    prefix = str(under).rstrip("/") + "/"
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        main = next((arg for arg in argv if arg in MAIN_CLASSES), None)
        if main is not None:
            home = argv[argv.index(main) + 1 :][:1]
            if home and home[0].startswith(prefix) and alive(int(proc.name)):
                found.append(int(proc.name))
    return found


def read_pid(pid_file: Path) -> int | None:
    """The pid in a pid file, or None when it is missing or garbled."""
    try:
        return int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None


def wait_gone(pid: int, timeout: float) -> bool:
    """Wait until the process is gone; False on timeout."""
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    _children.pop(pid, None)
    return True


def stop(pid: int, grace: float = 30.0) -> None:
    """TERM (the node's shutdown hook closes it cleanly), then KILL after `grace` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        if wait_gone(pid, wait):
            return
    if alive(pid):
        raise OSError(f"process {pid} survived SIGKILL")


def kill(pid: int) -> None:
    """SIGKILL, as a crash would; returns once the process is gone."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    wait_gone(pid, 10.0)
