"""The chunking worker process of big ingests: it never re-runs the caller's script, and when it
cannot start, chunking goes on in-process with the same result. A real spawned process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import psutil
import pytest

from gitkb.core.chunking import chunk_many
from gitkb.core.models import ChunkConfig
from gitkb.services.indexing.chunk_pipeline import PARALLEL_MIN_FILES, ChunkPipeline
from helpers import wait_until

ITEMS = [
    (f"# Page {i}\n\nSome text about topic {i}. Another sentence.\n", ChunkConfig("auto"), True)
    for i in range(5)
]


def test_a_script_without_a_main_guard_runs_once_and_its_big_ingest_uses_the_worker(tmp_path: Path) -> None:
    script = tmp_path / "unguarded.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import resource
            from pathlib import Path
            from gitkb import Workspace
            print("TOP-LEVEL RAN", flush=True)
            docs = Path({str(tmp_path)!r}) / "docs"
            docs.mkdir()
            for i in range({PARALLEL_MIN_FILES + 10}):
                (docs / f"d{{i}}.md").write_text(f"# Page {{i}}\\n\\nText about topic {{i}}. More.\\n")
            with Workspace(Path({str(tmp_path)!r}) / "ws", embedding_provider="none") as ws:
                ws.document_index("CREATE_INDEX", index_name="a", embeddings=False)
                r = ws.document_index("ADD_DOCUMENTS", index_name="a", filepath=str(docs))
            child = resource.getrusage(resource.RUSAGE_CHILDREN)  # the kept worker ended with close()
            print("RESULT", r["Success"], r["counts"]["added"], child.ru_utime + child.ru_stime > 0, flush=True)
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITKB_")}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("TOP-LEVEL RAN") == 1, out.stdout  # spawn did not import the script again
    assert f"RESULT True {PARALLEL_MIN_FILES + 10} True" in out.stdout, out.stdout + out.stderr


def test_when_the_worker_cannot_start_chunking_goes_on_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_a: object, **_k: object) -> None:
        raise RuntimeError("cannot start a new process")

    monkeypatch.setattr(ProcessPoolExecutor, "submit", refuse)
    with ChunkPipeline(parallel=True) as pipe:
        assert pipe.submit(ITEMS)() == chunk_many(list(ITEMS))
        assert pipe.submit(ITEMS[:2])() == chunk_many(list(ITEMS[:2]))  # and stays in-process


def _big_corpus(root: Path, n: int) -> Path:
    d = root / "corpus"
    for i in range(n):
        sub = d / f"s{i % 9}"
        sub.mkdir(parents=True, exist_ok=True)
        body = " ".join(
            f"Sentence {j} of page {i} is about topic{i % 17} and its failover runbook." for j in range(120)
        )
        (sub / f"p{i:04}.md").write_text(f"# Page {i}\n\n{body}\n")
    return d


def _spawned_workers(parent: psutil.Process) -> list[psutil.Process]:
    out = []
    for p in parent.children(recursive=True):
        try:
            if "multiprocessing" in " ".join(p.cmdline()):
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


@pytest.mark.slow
def test_the_chunk_worker_dies_with_a_killed_gitkb_add(tmp_path: Path) -> None:
    """kill -9 of `gitkb add` while its worker chunks: no process it started is left (3 runs)."""
    corpus = _big_corpus(tmp_path, PARALLEL_MIN_FILES * 3)
    gitkb = str(Path(sys.executable).parent / "gitkb")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GITKB_")},
        "GITKB_EMBEDDING_PROVIDER": "hashing",
    }
    left = []
    for run in range(3):
        home = str(tmp_path / f"ws{run}")
        subprocess.run(
            [gitkb, "--home", home, "index", "create", "kb"], env=env, check=True, capture_output=True
        )
        proc = subprocess.Popen(
            [gitkb, "--home", home, "add", "kb", str(corpus), "--no-wait"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        parent = psutil.Process(proc.pid)

        def started() -> list[psutil.Process]:  # called by wait_until at once, in this iteration
            kids = _spawned_workers(parent)  # noqa: B023
            assert kids or proc.poll() is None, "the ingest never started its chunking worker"  # noqa: B023
            return kids

        kids = wait_until(started, timeout=120, interval=0.05, what="the ingest to start its chunking worker")
        time.sleep(0.5)  # chunking now
        kids = parent.children(recursive=True)  # the worker and multiprocessing's resource tracker
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        _, alive = psutil.wait_procs(kids, timeout=10)
        left += [k for k in alive if k.status() != psutil.STATUS_ZOMBIE]
        for k in alive:
            k.kill()
    assert left == [], f"{len(left)} orphan(s) after 3 kills"
