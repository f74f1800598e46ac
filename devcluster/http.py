"""Tiny stdlib HTTP helpers for health polling: no client library needed to boot a node."""

from __future__ import annotations

import json
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any


def get_json(
    url: str,
    timeout: float = 5.0,
    headers: Mapping[str, str] | None = None,
    context: ssl.SSLContext | None = None,
) -> tuple[int, Any]:
    """GET a JSON document; returns (status, body) also for 4xx/5xx answers. `headers` and
    `context` (TLS trust) are for a secured node."""
    request = urllib.request.Request(url, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as err:
        try:
            body = json.load(err)
        except ValueError:
            body = None
        return err.code, body


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on host:port (SO_REUSEADDR, as OpenSearch binds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port_pair(gap: int = 100, host: str = "127.0.0.1") -> int:
    """A port p such that p and p + gap are both free (HTTP and transport of one node)."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        if port + gap <= 65535 and port_free(port + gap, host):
            return port
    raise OSError("no free pair of ports found")


def describe_listener(port: int) -> str:
    """A short guess of what answers on a port, for error messages."""
    try:
        status, body = get_json(f"http://127.0.0.1:{port}/", timeout=2.0)
    except (OSError, ValueError):
        return "a process that does not speak OpenSearch HTTP"
    if status == 200 and isinstance(body, dict) and "version" in body:
        return (
            f"OpenSearch {body['version'].get('number')} "
            f"(cluster {body.get('cluster_name')!r}, node {body.get('name')!r})"
        )
    return f"an HTTP server answering {status}"
