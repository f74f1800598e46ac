"""The files Docker users run: the compose file's version variable, the admin user, healthchecks."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

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
