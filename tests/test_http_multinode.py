"""Two `gitkb serve` processes on one workspace and one Chroma server: reads on both,
writes serialised by the writer lease (the other server forwards its writes through
the job queue), failover when the lease holder is killed, and a second server on the
embedded vector store refused."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers import wait_until

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
CHROMA = REPO / ".venv" / "bin" / "chroma"
GITKB = [sys.executable, "-c", "import sys; from gitkb.cli.main import main; main(sys.argv[1:])"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout: float = 60) -> None:
    def up() -> bool:
        try:
            return httpx.get(url, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(up, timeout=timeout, interval=0.2, what=f"{url} to come up")


@pytest.fixture
def chroma(tmp_path: Path) -> Iterator[tuple[str, int]]:
    host, port = os.environ.get("GITKB_TEST_CHROMA_HOST"), os.environ.get("GITKB_TEST_CHROMA_PORT")
    if host and port:
        yield host, int(port)
        return
    if not CHROMA.exists():
        pytest.skip("no chroma CLI in .venv")
    port_i = free_port()
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    cmd = [
        str(CHROMA),
        "run",
        "--path",
        str(tmp_path / "chroma"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port_i),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        wait_http(f"http://127.0.0.1:{port_i}/api/v2/heartbeat", 90)
        yield "127.0.0.1", port_i
    finally:
        proc.terminate()
        proc.wait(20)


class Server:
    def __init__(self, home: Path, env: dict[str, str]) -> None:
        cmd = [*GITKB, "--home", str(home), "serve", "--port", "0", "--log-level", "warning"]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        m = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
        assert m, line + (self.proc.stderr.read() if self.proc.poll() is not None else "")
        self.url = m.group(1)
        wait_http(self.url + "/healthz")

    def get(self, path: str) -> Any:
        return httpx.get(self.url + path, timeout=60)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return httpx.post(self.url + path, json=body, timeout=60)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(30)


def wait_job(s: Server, r: Any) -> dict[str, Any]:
    assert r.status_code == 200, r.text
    body = dict(r.json())
    if body.get("status") != "working":
        return body

    def finished() -> dict[str, Any] | None:
        job = s.get(f"/jobs/{body['job_id']}").json()
        return dict(job) if job["status"] in ("completed", "failed", "cancelled") else None

    job = wait_until(finished, timeout=120, interval=0.1, what=f"job {body['job_id']} to finish")
    assert job["status"] == "completed", job
    return dict(job["result"])


@pytest.fixture
def env() -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("GITKB_")},
        "GITKB_EMBEDDING_PROVIDER": "hashing",
        "GITKB_EMBEDDING_MODEL": "hashing-384",
        "GITKB_PROMOTE_AFTER_SECONDS": "10",
    }


def test_two_servers_share_a_workspace(tmp_path: Path, chroma: tuple[str, int], env: dict[str, str]) -> None:
    home = tmp_path / "ws"
    home.mkdir()
    (home / "gitkb.toml").write_text(f'[chroma]\nhost = "{chroma[0]}"\nport = {chroma[1]}\n')
    a = Server(home, env)
    b = None
    try:
        b = Server(home, env)
        assert a.get("/readyz").json()["writer"] is True
        assert b.get("/readyz").json()["writer"] is False
        assert json.loads((home / "server.json").read_text())["url"] == a.url
        # writes sent to B run on A (the lease holder) and are visible from both
        wait_job(b, b.post("/indexes", {"index_name": "kb"}))
        wait_job(b, b.post("/indexes/kb/texts", {"text": "The aurora failover drill.", "filepath": "d.md"}))
        wait_job(a, a.post("/indexes/kb/texts", {"text": "The borealis restore drill.", "filepath": "e.md"}))
        jobs = a.get("/jobs").json()["Jobs"]
        assert all(j["status"] == "completed" for j in jobs)
        for s in (a, b):
            for q, path in (("aurora", "d.md"), ("borealis", "e.md")):
                hits = s.post("/search", {"query": q, "mode": "keyword"}).json()["Results"]
                assert hits and hits[0]["filepath"] == path, (s.url, q, hits)
        # kill -9 the lease holder: B's next write takes the lease over and B advertises itself
        a.stop(signal.SIGKILL)
        wait_job(b, b.post("/indexes/kb/texts", {"text": "The corona cutover drill.", "filepath": "f.md"}))
        assert b.get("/readyz").json()["writer"] is True
        wait_until(
            lambda: json.loads((home / "server.json").read_text())["url"] == b.url,
            timeout=10,
            interval=0.2,
            what="server.json to stop naming the dead server",
        )
        assert b.post("/search", {"query": "corona", "mode": "keyword"}).json()["Results"]
    finally:
        a.stop(signal.SIGKILL)
        if b is not None:
            b.stop()


def test_second_server_on_embedded_chroma_is_refused(tmp_path: Path, env: dict[str, str]) -> None:
    home = tmp_path / "ws"
    a = Server(home, env)
    try:
        cmd = [*GITKB, "--home", str(home), "serve", "--port", "0"]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode != 0
        assert "embedded vector store" in proc.stderr and a.url in proc.stderr
        assert a.get("/healthz").status_code == 200
    finally:
        a.stop()
    assert not (home / "server.json").exists()
