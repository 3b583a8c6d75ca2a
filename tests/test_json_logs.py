"""`gitkb serve --log-format json` as a subprocess on a free loopback port: every stderr line is one
JSON object; the access lines carry time, level, logger, message, request id, principal, route,
status and duration; the X-Request-Id header names the line; no token value is ever logged."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

GITKB = [sys.executable, "-c", "import sys; from gitkb.cli.main import main; main(sys.argv[1:])"]
READER = "reader-secret-" + "q" * 20
ADMIN = "admin-secret-" + "z" * 20
STRANGER = "stranger-secret-" + "k" * 20
TOML = (
    '[[server.tokens]]\nname = "scraper"\ntoken_env = "GITKB_TEST_READER"\nscopes = ["read"]\n'
    '[[server.tokens]]\nname = "ops"\ntoken_env = "GITKB_TEST_ADMIN"\nscopes = ["admin"]\n'
)


def test_json_lines_with_request_ids_and_no_secrets(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    home.mkdir()
    (home / "gitkb.toml").write_text(TOML)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GITKB_")},
        "GITKB_EMBEDDING_PROVIDER": "hashing",
        "GITKB_EMBEDDING_MODEL": "hashing-384",
        "GITKB_TEST_READER": READER,
        "GITKB_TEST_ADMIN": ADMIN,
    }
    cmd = [*GITKB, "--home", str(home), "serve", "--port", "0", "--log-format", "json"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    first = proc.stderr.readline()
    started = json.loads(first)
    m = re.search(r"on (http://127\.0\.0\.1:\d+)", started["message"])
    assert m and started["logger"] == "gitkb.http" and started["level"] == "info", first
    url = m.group(1)
    answers: list[httpx.Response] = []
    try:
        with httpx.Client(base_url=url, timeout=60) as c:
            for _ in range(300):  # the Workspace opens in the lifespan
                try:
                    if c.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
            answers.append(
                c.get("/metrics", headers={"Authorization": f"Bearer {READER}", "X-Request-Id": "t-1"})
            )
            answers.append(
                c.post(
                    "/search",
                    json={"query": "anything"},
                    headers={"Authorization": f"Bearer {ADMIN}"},
                    params={"token": ADMIN},  # a secret in the query string: refused, never logged
                )
            )
            answers.append(c.get("/jobs", headers={"Authorization": f"Bearer {STRANGER}"}))
            answers.append(c.get("/jobs", headers={"Authorization": f"Bearer {ADMIN}"}))
    finally:
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=60)
    assert [r.status_code for r in answers] == [200, 400, 401, 200], [r.text for r in answers]
    text = first + rest
    for secret in (READER, ADMIN, STRANGER):
        assert secret not in text
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]  # every line is JSON
    for rec in lines:
        assert {"time", "level", "logger", "message", "request_id"} <= set(rec), rec
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", rec["time"]), rec
    access = {rec["request_id"]: rec for rec in lines if rec["logger"] == "gitkb.http.access"}
    ids = [r.headers["x-request-id"] for r in answers]
    assert ids[0] == "t-1" and len(set(ids)) == 4
    want: list[dict[str, Any]] = [
        {"method": "GET", "route": "/metrics", "status": 200, "principal": "token:scraper"},
        {"method": "POST", "route": "/search", "status": 400, "principal": "token:ops"},
        {"method": "GET", "route": "/jobs", "status": 401, "principal": None},
        {"method": "GET", "route": "/jobs", "status": 200, "principal": "token:ops"},
    ]
    for rid, expected in zip(ids, want, strict=True):
        rec = access[rid]
        assert {k: rec[k] for k in expected} == expected, rec
        assert isinstance(rec["duration_s"], float) and rec["duration_s"] >= 0
        assert rec["level"] == "info"


def test_a_bearer_credential_in_a_message_or_traceback_is_redacted() -> None:
    import logging

    from gitkb.http.logs import JsonFormatter

    try:
        raise ValueError(f"upstream said: Authorization: Bearer {ADMIN}")
    except ValueError:
        rec = logging.LogRecord(
            "gitkb.x", logging.WARNING, __file__, 1, "called %s?token=%s", ("/x", READER), sys.exc_info()
        )
    line = JsonFormatter().format(rec)
    out = json.loads(line)
    assert ADMIN not in line and READER not in line
    assert out["message"] == "called /x?token=[redacted]" and "Bearer [redacted]" in out["exception"]
