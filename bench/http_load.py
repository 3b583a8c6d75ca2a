"""HTTP load and fault figures of the HTTP issue, against `gitkb serve` on loopback.

    .venv/bin/python bench/http_load.py [--duration 60] [--clients 8] [--embedder hashing|minilm]
                                        [--chroma-port P] [--skip-load] [--skip-kill] [--keep DIR]

1. Load: ``--clients`` threads POST /search (mode hybrid, top_n 10, questions of
   awsdocs/questions.dev.jsonl) for ``--duration`` seconds while an ingest
   (ADD_DOCUMENTS of a directory by server-side path) and a source sync (a
   commit changing files, announced by POST /webhooks/generic) run. Prints
   requests/s, p50/p95/p99 latency, the non-2xx count, and how long the ingest
   and the sync took.
2. Kill -9: a commit changing many files, announced by a signed GitHub push
   webhook (202 + job id); the server is SIGKILLed while the sync job runs, then
   restarted: the job must be resumed or retried and end completed, the replayed
   delivery must answer ``duplicate``, and the counts must agree (synced commit,
   documents = files in the tree, status caught up: dirty counts 0, every hit of
   the changed text resolves to a live document).

The corpus is ../shared/data/awsdocs/docs: two guides form the source's git
repository, a third is ingested by path.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "awsdocs"
SOURCE_GUIDES = ("aws-lambda-developer-guide", "amazon-ec2-user-guide")
INGEST_GUIDE = "amazon-dynamodb-developer-guide"
SECRET = "bench-webhook-secret"
GITKB = [sys.executable, "-c", "import sys; from gitkb.cli.main import main; main(sys.argv[1:])"]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s)) - 1))]


class Server:
    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.home, self.env = home, env
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self) -> None:
        cmd = [*GITKB, "--home", str(self.home), "serve", "--port", "0", "--log-level", "warning"]
        log = open(self.home.parent / "server.log", "a")  # noqa: SIM115 - the server's lifetime
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=log, text=True, env=self.env)
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        if "http://" not in line:
            sys.exit(f"server did not start: {line}{self.proc.stderr.read()}")
        self.url = line.split(" on ", 1)[1].split()[0]
        threading.Thread(target=lambda: shutil.copyfileobj(self.proc.stderr, log), daemon=True).start()  # type: ignore[union-attr,arg-type]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        sys.exit("server not ready")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(30)

    def call(
        self, method: str, path: str, body: Any = None, timeout: float = 120, **kw: Any
    ) -> dict[str, Any]:
        r = httpx.request(method, self.url + path, json=body, timeout=timeout, **kw)
        if r.status_code >= 300:
            sys.exit(f"{method} {path} -> {r.status_code} {r.text[:500]}")
        return dict(r.json())

    def job(self, answer: dict[str, Any], timeout: float = 1800) -> tuple[dict[str, Any], float]:
        t0 = time.perf_counter()
        if answer.get("status") != "working":
            return answer, 0.0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            j = self.call("GET", f"/jobs/{answer['job_id']}")
            if j["status"] in ("completed", "failed", "cancelled"):
                return j, time.perf_counter() - t0
            time.sleep(0.1)
        sys.exit(f"job {answer['job_id']} did not finish")


def setup(tmp: Path, args: argparse.Namespace) -> tuple[Server, Path, Path]:
    upstream, remote, ingest, home = tmp / "upstream", tmp / "remote.git", tmp / "ingest", tmp / "ws"
    for g in SOURCE_GUIDES:
        shutil.copytree(DATA / "docs" / g, upstream / "docs" / g)
    shutil.copytree(DATA / "docs" / INGEST_GUIDE, ingest / INGEST_GUIDE)
    git(upstream, "init", "-q", "-b", "main")
    git(upstream, "add", "-A")
    git(upstream, "commit", "-q", "-m", "corpus")
    git(tmp, "clone", "-q", "--bare", str(upstream), str(remote))
    git(upstream, "remote", "add", "origin", str(remote))
    home.mkdir()
    toml = f'[server]\nallowed_roots = ["{ingest}"]\nrequest_timeout_s = 120\n'
    if args.chroma_port:
        toml += f'[chroma]\nhost = "127.0.0.1"\nport = {args.chroma_port}\n'
    (home / "gitkb.toml").write_text(toml)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITKB_")}
    env.update(GITKB_WEBHOOK_SECRET=SECRET, HF_HUB_OFFLINE="1", ANONYMIZED_TELEMETRY="False")
    if args.embedder == "hashing":
        env.update(GITKB_EMBEDDING_PROVIDER="hashing", GITKB_EMBEDDING_MODEL="hashing-384")
    server = Server(home, env)
    server.start()
    t0 = time.perf_counter()
    server.call("POST", "/sources", {"name": "aws", "url": str(remote)})
    done, _ = server.job(server.call("POST", "/sources/aws/sync", {}))
    print(f"setup: source sync of {sum(1 for _ in upstream.rglob('*.md'))} files in {time.perf_counter() - t0:.1f} s"
          f" ({done.get('status', 'inline')})")  # fmt: skip
    wait_caught_up(server, 1800)
    return server, upstream, ingest


def wait_caught_up(server: Server, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    st: dict[str, Any] = {}
    while time.monotonic() < deadline:
        st = server.call("GET", "/status")
        if st.get("caught_up") or (st["queue_depth"] == 0 and not st["in_flight"] and not st["dirty_paths"]
                                   and not st["dirty_embeddings"]):  # fmt: skip
            return st
        time.sleep(0.5)
    return st


def change_files(upstream: Path, guide: str, word: str, limit: int) -> str:
    files = sorted((upstream / "docs" / guide).glob("*.md"))[:limit]
    for f in files:
        f.write_text(f.read_text() + f"\n\nChange marker {word} for this page.\n")
    git(upstream, "add", "-A")
    git(upstream, "commit", "-q", "-m", f"touch {len(files)} pages ({word})")
    git(upstream, "push", "-q", "origin", "HEAD:main")
    return git(upstream, "rev-parse", "HEAD")


def load(server: Server, upstream: Path, ingest: Path, args: argparse.Namespace) -> None:
    questions = [
        json.loads(line)["question"] for line in (DATA / "questions.dev.jsonl").read_text().splitlines()
    ]
    lat: list[float] = []
    codes: dict[int, int] = {}
    errors: list[str] = []
    lock = threading.Lock()
    stop = time.monotonic() + args.duration

    def client(i: int) -> None:
        with httpx.Client(base_url=server.url, timeout=60) as c:
            n = i
            while time.monotonic() < stop:
                q = questions[n % len(questions)]
                n += args.clients
                t0 = time.perf_counter()
                try:
                    r = c.post("/search", json={"query": q, "mode": args.mode, "top_n": 10})
                    code = r.status_code
                except httpx.HTTPError as exc:
                    code = 0
                    with lock:
                        errors.append(repr(exc))
                dt = time.perf_counter() - t0
                with lock:
                    lat.append(dt)
                    codes[code] = codes.get(code, 0) + 1
                    if code != 200 and len(errors) < 5:
                        errors.append(f"{code}: {r.text[:200]}")

    writes: dict[str, Any] = {}

    def writer() -> None:
        time.sleep(min(5, args.duration / 10))
        t0 = time.perf_counter()
        server.call("POST", "/indexes", {"index_name": "ingested"})
        add = server.call("POST", "/indexes/ingested/documents", {"filepath": str(ingest)})
        sha = change_files(upstream, SOURCE_GUIDES[0], "loadphase", 40)
        t1 = time.perf_counter()
        sync = server.call("POST", "/webhooks/generic", {"source": "aws", "commit": sha})
        ing, _ = server.job(add)
        writes["ingest_s"] = time.perf_counter() - t0
        writes["ingest"] = ing.get("result", ing).get("counts", {})
        syn, _ = server.job({"status": "working", "job_id": sync["job_id"]})
        writes["sync_s"] = time.perf_counter() - t1
        writes["sync_status"] = syn["status"]

    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    w = threading.Thread(target=writer)
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    if not args.no_writes:
        w.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    if not args.no_writes:
        w.join()
    non2xx = sum(v for k, v in codes.items() if not 200 <= k < 300)
    print(f"load: {args.clients} clients x {args.duration:.0f} s {args.mode} search ({args.embedder} embedder,"
          f" {'chroma server' if args.chroma_port else 'embedded chroma'})")  # fmt: skip
    print(f"  requests {len(lat)}  {len(lat) / elapsed:.1f} req/s  p50 {pct(lat, 50) * 1000:.1f} ms"
          f"  p95 {pct(lat, 95) * 1000:.1f} ms  p99 {pct(lat, 99) * 1000:.1f} ms"
          f"  max {max(lat) * 1000:.0f} ms  mean {statistics.mean(lat) * 1000:.1f} ms")  # fmt: skip
    print(f"  status codes {codes}  non-2xx {non2xx}")
    for e in errors[:5]:
        print(f"  error: {e}")
    print(f"  ingest of {INGEST_GUIDE} by path during the load: {writes.get('ingest_s', float('nan')):.1f} s"
          f" {writes.get('ingest')}")  # fmt: skip
    print(f"  sync of a 40-file commit via /webhooks/generic: {writes.get('sync_s', float('nan')):.1f} s"
          f" ({writes.get('sync_status')})")  # fmt: skip


def kill_during_sync(server: Server, upstream: Path) -> None:
    from gitkb.services.changes.webhooks import github_signature

    st = wait_caught_up(server, 1800)
    sha = change_files(upstream, SOURCE_GUIDES[1], "killphase", 10_000)
    before = git(upstream, "rev-parse", "HEAD~1")
    payload = json.dumps({"ref": "refs/heads/main", "before": before, "after": sha,
                          "repository": {"clone_url": f"file://{upstream.parent / 'remote.git'}"}}).encode()  # fmt: skip
    headers = {"Content-Type": "application/json", "X-GitHub-Event": "push", "X-GitHub-Delivery": "kill-1",
               "X-Hub-Signature-256": github_signature(SECRET, payload)}  # fmt: skip
    r = httpx.post(server.url + "/webhooks/github", content=payload, headers=headers, timeout=60)
    assert r.status_code == 202, r.text
    job_id = r.json()["job_id"]
    state, t0 = "queued", time.monotonic()
    while state in ("queued",) and time.monotonic() - t0 < 60:
        state = server.call("GET", f"/jobs/{job_id}")["status"]
        time.sleep(0.005)
    progress = server.call("GET", f"/jobs/{job_id}")["progress"]
    server.kill(signal.SIGKILL)
    print(f"kill -9: job {job_id} was {state} (progress {progress}) when the server was killed")
    server.start()
    job, waited = server.job({"status": "working", "job_id": job_id})
    replay = httpx.post(server.url + "/webhooks/github", content=payload, headers=headers, timeout=60).json()
    st = wait_caught_up(server, 1800)
    src = next(s for s in server.call("GET", "/sources")["Sources"] if s["name"] == "aws")
    files = sum(1 for _ in (upstream / "docs").rglob("*.md"))
    docs = server.call("GET", "/indexes")["IndexDetails"][src["indexes"][0]]["file_count"]
    hits = server.call("POST", "/search", {"query": "killphase", "mode": "keyword", "top_n": 50})["Results"]
    dead = [h for h in hits if httpx.get(server.url + f"/indexes/{h['index_name']}/documents/{h['file_id']}",
                                          timeout=30).status_code != 200]  # fmt: skip
    attempts = job.get("attempts")
    print(f"  after restart: job {job['status']} in {waited:.1f} s (attempts {attempts}); replayed delivery"
          f" duplicate={replay.get('duplicate')} job_id same={replay.get('job_id') == job_id}")  # fmt: skip
    print(f"  synced commit = pushed: {src['synced_commit'] == sha}; documents {docs} = files {files}:"
          f" {docs == files}; status {st['status']} queue {st['queue_depth']} dirty_paths {st['dirty_paths']}"
          f" dirty_embeddings {st['dirty_embeddings']}; hits of the changed text {len(hits)}, dead {len(dead)}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--embedder", choices=("hashing", "minilm"), default="hashing")
    ap.add_argument("--chroma-port", type=int, help="use a Chroma server on 127.0.0.1:PORT")
    ap.add_argument("--mode", choices=("keyword", "semantic", "hybrid"), default="hybrid")
    ap.add_argument("--no-writes", action="store_true", help="load without the concurrent ingest and sync")
    ap.add_argument("--skip-load", action="store_true")
    ap.add_argument("--skip-kill", action="store_true")
    ap.add_argument("--keep", type=Path)
    args = ap.parse_args()
    os.environ.update(
        GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@gitkb.invalid",
        GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@gitkb.invalid", GIT_ALLOW_PROTOCOL="file",
    )  # fmt: skip
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="gitkb-http-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    server = None
    try:
        server, upstream, ingest = setup(tmp, args)
        if not args.skip_load:
            load(server, upstream, ingest, args)
        if not args.skip_kill:
            kill_during_sync(server, upstream)
    finally:
        if server is not None:
            server.kill(signal.SIGTERM)
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
