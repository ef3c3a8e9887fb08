"""A reply carries the projected token as a bearer token, read again when the file changes."""

from __future__ import annotations

import asyncio
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from cloudevents.core.bindings.http import HTTPMessage

import replies


def test_reply_carries_the_token_file(tmp_path, monkeypatch):
    token_file = tmp_path / "prestart-token"
    monkeypatch.setenv("PRESTART_TOKEN_FILE", str(token_file))
    seen: list[str | None] = []

    class Sink(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("content-length", "0")))
            seen.append(self.headers.get("Authorization"))
            self.send_response(202)
            self.end_headers()

        def log_message(self, *args):  # noqa: ANN002
            pass

    server = HTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/events"
        message = HTTPMessage(headers={"ce-id": "r1", "content-type": "application/json"}, body=b"{}")
        for token in ("first", "second"):
            token_file.write_text(token + "\n")
            asyncio.run(replies.post_event(url, message))
    finally:
        server.shutdown()
    assert seen == ["Bearer first", "Bearer second"]


def test_a_named_token_file_must_exist(tmp_path, monkeypatch):
    monkeypatch.setenv("PRESTART_TOKEN_FILE", str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError):
        replies.reply_token()
