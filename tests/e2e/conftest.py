"""Fixtures of the e2e tests: one seeded workspace on the real OpenSearch for the session, the
service under uvicorn on a free loopback port, and headless Debian Chromium through Playwright.

Every e2e test only reads, so they share one index (seeding costs seconds on 2 cores).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from uuid import uuid4

import pytest
import uvicorn
from api.helpers import drop, opener, threaded_server
from fastapi import FastAPI
from opensearchpy import OpenSearch
from playwright.sync_api import BrowserContext, Page, sync_playwright

from app.main import create_app
from suli.service import Searcher

from .world import World, make_world

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = os.environ.get("SULI_CHROMIUM", "/usr/bin/chromium")
# Debian's Chromium, headless, with nothing reaching out to the network (this machine has none).
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
START_TIMEOUT_S = 60.0


@pytest.fixture(scope="session")
def e2e_world(
    opensearch_url: str, os_client: OpenSearch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    name = f"test-{uuid4().hex}"
    try:
        yield make_world(opensearch_url, name, tmp_path_factory.mktemp("e2e-home"))
    finally:
        drop(os_client, name)


@pytest.fixture(scope="session")
def core(e2e_world: World) -> Iterator[Searcher]:
    """The search core over the world, called directly (the reference every edge must match)."""
    searcher = opener()(e2e_world.settings)
    yield searcher
    searcher.backend.close()


@dataclass(frozen=True)
class Service:
    url: str
    app: FastAPI
    world: World


@contextlib.contextmanager
def running(app: FastAPI) -> Iterator[str]:
    """An app under uvicorn in a thread, on a free port; yields its base URL."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))  # a free port, held from here on (no race with other tests)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", ws="none", access_log=False
    )
    try:
        with threaded_server(config, sock, start_timeout_s=START_TIMEOUT_S, stop_timeout_s=30):
            yield f"http://127.0.0.1:{port}"
    finally:
        sock.close()


@pytest.fixture(scope="session")
def service(e2e_world: World) -> Iterator[Service]:
    """The whole service (API, web page, MCP at /mcp) under uvicorn in a thread."""
    app = create_app(e2e_world.settings, opener=opener())
    with running(app) as url:
        yield Service(url, app, e2e_world)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    """Headless Chromium (Debian's package, never a downloaded build) with a fresh profile."""
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's chromium (.ci/browser-deps does)",
            pytrace=False,
        )
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def page(browser: BrowserContext) -> Iterator[Page]:
    """A new tab, signed out (no cookies from an earlier test)."""
    browser.clear_cookies()
    tab = browser.new_page()
    tab.set_default_timeout(30_000)
    yield tab
    tab.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """test-artifacts/ at the repo root (git-ignored; CI keeps it)."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
