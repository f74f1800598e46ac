"""A wrong credential or TLS set-up against a secured node: one line naming the setting to fix,
on the CLI (exit 1 or 2) and in the service's log (HTTP 503, /readyz not ready), never a
traceback, never the password in any output or log line."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from secured_node import SecuredNode, secured_node

from app.main import create_app
from cli.main import cli
from devcluster import security

__all__ = ["secured_node"]  # the session fixture, imported so pytest finds it here

WRONG_HOST = "wrong-host.suli.test"  # resolved to 127.0.0.1 here; absent from the certificate
SECRET = "Sq7-not-the-password-Vx2"


def _wrong_password(node: SecuredNode, _tmp: Path) -> dict[str, str]:
    return node.env("suli-query", SULI_OPENSEARCH_PASSWORD=SECRET)


def _unknown_ca(node: SecuredNode, tmp: Path) -> dict[str, str]:
    other = security.make_material(tmp / "other-ca")  # a CA that signed nothing of the node
    return node.env("suli-query", SULI_OPENSEARCH_CA_CERTS=str(other.ca))


def _wrong_host(node: SecuredNode, _tmp: Path) -> dict[str, str]:
    url = node.url.replace("127.0.0.1", WRONG_HOST)
    return node.env("suli-query", SULI_OPENSEARCH_URL=url)


def _plain_http(node: SecuredNode, _tmp: Path) -> dict[str, str]:
    return node.env("suli-query", SULI_OPENSEARCH_URL=node.url.replace("https://", "http://"))


CASES: dict[str, tuple[Callable[[SecuredNode, Path], dict[str, str]], str]] = {
    # case -> (environment, the words the one line must hold: the setting to fix)
    "wrong password": (_wrong_password, "check SULI_OPENSEARCH_USER and SULI_OPENSEARCH_PASSWORD"),
    "unknown CA": (_unknown_ca, "set SULI_OPENSEARCH_CA_CERTS to the cluster's CA file"),
    "wrong-host certificate": (_wrong_host, "does not name the host in SULI_OPENSEARCH_URL"),
    "plain HTTP to HTTPS": (_plain_http, "use https:// in SULI_OPENSEARCH_URL"),
}


@pytest.fixture
def wrong_host_resolves(monkeypatch: pytest.MonkeyPatch) -> None:
    """WRONG_HOST resolves to the node's address in this process, as a DNS alias would."""
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kw: Any) -> Any:
        return real("127.0.0.1" if host == WRONG_HOST else host, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def _secrets(node: SecuredNode) -> list[str]:
    return [SECRET, node.admin_password, *node.passwords.values()]


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.usefixtures("wrong_host_resolves")
def test_the_cli_says_which_setting_to_fix_in_one_line(
    case: str, secured_node: SecuredNode, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_env, fix = CASES[case]
    env = make_env(secured_node, tmp_path) | {"SULI_HOME": str(tmp_path)}
    caplog.set_level(logging.DEBUG)
    result = CliRunner().invoke(cli, ["search", "anything", "--as", "prn_x"], env=env)
    assert result.exit_code in (1, 2), result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert fix in lines[0]
    assert "Traceback" not in result.output + result.stderr
    seen = result.output + result.stderr + caplog.text
    for secret in _secrets(secured_node):
        assert secret not in seen


OPS = [["status"], ["indices"], ["reindex", "--dry-run"]]


@pytest.mark.parametrize("case", ["wrong password", "unknown CA"])
@pytest.mark.parametrize("args", OPS, ids=lambda a: " ".join(a))
def test_ops_commands_give_the_same_one_line(
    case: str, args: list[str], secured_node: SecuredNode, tmp_path: Path
) -> None:
    make_env, fix = CASES[case]
    env = make_env(secured_node, tmp_path) | {"SULI_HOME": str(tmp_path)}
    result = CliRunner().invoke(cli, args, env=env)
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert fix in lines[0] and "Traceback" not in result.output + result.stderr


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.usefixtures("wrong_host_resolves")
def test_the_service_answers_503_and_is_not_ready(
    case: str,
    secured_node: SecuredNode,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    make_env, fix = CASES[case]
    for key, value in (make_env(secured_node, tmp_path) | {"SULI_HOME": str(tmp_path)}).items():
        monkeypatch.setenv(key, value)
    caplog.set_level(logging.DEBUG)
    with TestClient(create_app(), raise_server_exceptions=False) as http:
        ready = http.get("/readyz")
        search = http.get(
            "/api/v1/search", params={"q": "x"}, headers={"Authorization": "Bearer sk_nothing"}
        )
    assert ready.status_code == 503
    assert search.status_code == 503, search.text
    # Callers are told the backend is unavailable, never how it is set up; the operator's
    # log line names the setting to fix.
    assert "unavailable" in search.json()["error"]["message"]
    assert fix not in search.text + ready.text
    assert fix in caplog.text
    assert "Traceback" not in caplog.text
    seen = ready.text + search.text + caplog.text
    for secret in _secrets(secured_node):
        assert secret not in seen


def test_secure_is_refused_for_the_3_5_line_before_anything_starts(tmp_path: Path) -> None:
    state = tmp_path / "os3-secure"
    args = ["cluster", "--state-dir", str(state), "up", "--secure", "--version", "3.5.0"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert "--secure needs OpenSearch 2.19.1" in result.stderr
    assert "refuses the opensearch-security zip for 3.5.0" in result.stderr
    assert not state.exists()  # nothing provisioned, nothing written
