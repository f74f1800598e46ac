"""Every command's OpenSearch fault is the one error line `suli search` gives, naming the setting
to fix: a stopped node (a port nobody listens on, for real), and an untrusted certificate or a
refused password (the transport made to fail as the client does against such a node)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import opensearchpy
import pytest
from click.testing import CliRunner
from opensearchpy.transport import Transport

from cli.main import cli

COMMANDS = [
    ["search", "deploy", "--as", "prn_ana"],
    ["status"],
    ["indices"],
    ["reindex", "--dry-run"],
    ["acl", "list"],
    ["access", "itm_x", "--as", "prn_ana"],
]


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again: nobody listens there


def _run(tmp_path: Path, url: str, args: list[str]) -> Any:
    env: dict[str, str | None] = {
        "SULI_HOME": str(tmp_path),
        "SULI_EMBEDDER": "fake",
        "SULI_BACKEND": None,
        "SULI_OPENSEARCH_URL": url,
        "SULI_OPENSEARCH_TIMEOUT_S": "5",
    }
    return CliRunner().invoke(cli, args, env=env)


def _one_line(result: Any) -> str:
    assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: OpenSearch "), result.stderr
    assert "Traceback" not in result.output and "HTTPConnection(" not in lines[0]
    return str(lines[0])


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_stopped_node_is_one_line_naming_the_url_and_its_setting(
    tmp_path: Path, args: list[str]
) -> None:
    url = f"http://127.0.0.1:{_unused_port()}"
    line = _one_line(_run(tmp_path, url, args))
    assert f"connection refused at {url}" in line and "SULI_OPENSEARCH_URL" in line


CERT = opensearchpy.ConnectionError(
    "N/A",
    "SSLError([SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed "
    "certificate in certificate chain (_ssl.c:1006))",
    Exception("certificate verify failed"),
)
PASSWORD = opensearchpy.AuthenticationException(
    401, "Unauthorized", "Authentication finally failed"
)
FAULTS = {
    "untrusted certificate": (CERT, "set SULI_OPENSEARCH_CA_CERTS to the cluster's CA file"),
    "wrong password": (PASSWORD, "check SULI_OPENSEARCH_USER and SULI_OPENSEARCH_PASSWORD"),
}


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_tls_and_credential_faults_name_the_setting_on_every_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str, args: list[str]
) -> None:
    error, fix = FAULTS[fault]

    def refuse(self: Transport, *a: Any, **kw: Any) -> Any:
        raise error

    monkeypatch.setattr(Transport, "perform_request", refuse)
    line = _one_line(_run(tmp_path, "https://127.0.0.1:9200", args))
    assert fix in line
    assert "CERTIFICATE_VERIFY_FAILED" not in line and "finally failed" not in line
