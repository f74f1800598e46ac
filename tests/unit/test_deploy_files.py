"""The files Docker users run: the compose file's version variable, the admin user, healthchecks,
the settings it passes (valid, no unknown name) and what replicas share (redis)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from suli.config_ref import unknown_lines
from suli.settings import Settings

REPO = Path(__file__).parents[2]


def _compose() -> dict[str, Any]:
    data = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def test_opensearch_version_comes_from_a_variable_defaulting_to_the_tested_line() -> None:
    services = _compose()["services"]
    images = {services[name]["image"] for name in ("os1", "os2", "os3")}
    assert images == {"opensearchproject/opensearch:${OPENSEARCH_VERSION:-2.19.1}"}


def test_the_admin_container_runs_as_the_data_folders_owner_with_a_writable_home() -> None:
    admin = _compose()["services"]["suli-admin"]
    assert admin["user"] == "${SULI_UID:-1000}:${SULI_GID:-1000}"
    assert admin["environment"]["SULI_HOME"].startswith("/data/")
    assert "./data:/data" in admin["volumes"]


def test_the_container_is_healthy_only_when_ready() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    check = re.search(r"HEALTHCHECK[^\n]*\\\n\s*CMD (.*)", dockerfile)
    assert check, "no HEALTHCHECK"
    assert "/readyz" in check.group(1) and "/healthz" not in check.group(1)


def _resolved(env: dict[str, Any]) -> dict[str, str]:
    """A service's environment as its container gets it from a shell that sets nothing:
    `${X:-default}` gives the default, a key without a value is left out (compose passes it
    through only when the shell has it)."""
    out = {}
    for key, value in env.items():
        if value is None:
            continue
        out[key] = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", str(value))
    return out


@pytest.mark.parametrize("service", ["suli", "suli-admin"])
def test_every_setting_the_compose_file_passes_is_valid(
    service: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _resolved(_compose()["services"][service]["environment"])
    assert unknown_lines(env) == []  # no mistyped SULI_* name
    for key in [k for k in os.environ if k.startswith("SULI_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = Settings()  # parses, or raises naming the variable
    assert settings.backend == "opensearch"
    assert settings.opensearch_url == "http://os1:9200,http://os2:9200,http://os3:9200"


def test_replicas_share_limits_and_cursors_through_redis() -> None:
    compose = _compose()
    services = compose["services"]
    env = services["suli"]["environment"]
    store = env["SULI_SHARED_STORE"]
    assert store == "redis://redis:6379/0" and "redis" in services
    # The cursor secret: passed through from the shell when set (no empty default, which
    # would sign with ""), else made once and kept in redis, whose data lives in a volume.
    assert "SULI_CURSOR_SECRET" in env and env["SULI_CURSOR_SECRET"] is None
    redis = services["redis"]
    assert (
        any(v.endswith(":/data") for v in redis["volumes"]) and "--appendonly" in redis["command"]
    )
    assert "redis-data" in compose["volumes"]
    assert services["suli"]["depends_on"]["redis"] == {"condition": "service_healthy"}
    assert "ports" not in redis  # only the services reach it
    # --scale suli=N needs a port per replica: a range on the host side.
    [port] = services["suli"]["ports"]
    assert re.fullmatch(r"127\.0\.0\.1:8000-80\d\d:8000", port)
