"""JSON log lines carry the message once: not uvicorn's coloured copy of it."""

from __future__ import annotations

import json
import logging

from app.logs import JsonFormatter


def test_uvicorns_color_message_is_left_out_and_extras_kept() -> None:
    record = logging.LogRecord("uvicorn.error", logging.INFO, "x", 1, "Started %s", ("ok",), None)
    record.color_message = "Started \x1b[1m%s\x1b[0m"
    record.request_id = "r1"
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "Started ok" and line["request_id"] == "r1"
    assert "color_message" not in line
