"""Every CLI command that waits shows each phase it waits on (vectors included) as a bar on a
terminal's stderr: done/total; nothing when stderr is not a terminal or with --json. A command
that does not wait for vectors says so and how to follow, in CLI words."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cli_tty import no_tty, on_tty, pages, workspace
from helpers import Upstream

BAR = re.compile(r"(indexing|embedding|reindexing|syncing|re-chunking|job \S+)\s+\[[#-]*\]\s+(\d+)/(\d+)")


def phases(tty: str) -> dict[str, tuple[int, int]]:
    """The last done/total each phase's bar showed."""
    return {m.group(1): (int(m.group(2)), int(m.group(3))) for m in BAR.finditer(tty)}


def chunks_written(stdout: str) -> int:
    m = re.search(r"(\d+) chunks written", stdout)
    assert m, stdout
    return int(m.group(1))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = workspace(tmp_path)
    assert no_tty("--home", str(h), "index", "create", "kb").code == 0
    return h


def test_add_shows_the_indexing_and_the_vector_phase_on_a_terminal(home: Path, tmp_path: Path) -> None:
    folder = pages(tmp_path / "pages", 20)
    ran = on_tty("--home", str(home), "add", "kb", str(folder))
    assert ran.code == 0, ran
    n = chunks_written(ran.stdout)
    assert n >= 200  # many more than the background embedder does between the write and the wait
    seen = phases(ran.tty)
    assert seen["indexing"] == (20, 20), ran.tty
    assert seen["embedding"] == (n, n), ran.tty
    assert re.search(r"embedding .*\d+/\d+ .*\d+\.\d/s", ran.tty), ran.tty  # and its rate
    assert f"vectors: {n} chunk(s) embedded" in ran.stdout
    assert ran.tty.index("indexing") < ran.tty.index("embedding")


def test_no_bar_without_a_terminal_or_with_json(home: Path, tmp_path: Path) -> None:
    plain = no_tty("--home", str(home), "add", "kb", str(pages(tmp_path / "a", 10)))
    assert plain.code == 0, plain.stderr
    assert "vectors:" in plain.stdout  # it did wait for them, silently
    assert not phases(plain.stderr) and "indexing" not in plain.stderr and "embedding" not in plain.stderr
    as_json = on_tty("--home", str(home), "--json", "add", "kb", str(pages(tmp_path / "b", 10)))
    assert as_json.code == 0, as_json
    assert as_json.tty.strip() == "", as_json.tty  # nothing on the terminal at all
    assert '"vectors": "ready"' in as_json.stdout


def test_reindex_waits_for_the_vectors_of_what_changed(home: Path, tmp_path: Path) -> None:
    folder = pages(tmp_path / "pages", 12)
    assert no_tty("--home", str(home), "add", "kb", str(folder)).code == 0
    for p in sorted(folder.iterdir()):
        p.write_text(p.read_text().replace("replicas", "standbys"))
    ran = on_tty("--home", str(home), "reindex")
    assert ran.code == 0, ran
    seen = phases(ran.tty)
    assert seen["reindexing"][0] == seen["reindexing"][1] == 12, ran.tty
    done, total = seen["embedding"]
    assert done == total > 100, ran.tty
    assert f"vectors: {total} chunk(s) embedded" in ran.stdout


def test_source_sync_shows_its_phase_and_says_it_does_not_wait_for_vectors(
    tmp_path: Path, upstream: Upstream
) -> None:
    for i in range(12):
        body = " ".join(
            f"Step {j} of runbook {i}: promote the replica, then check replication lag." for j in range(300)
        )
        upstream.write(f"docs/bulk/runbook-{i:02}.md", f"# Runbook {i}\n\n{body}\n")
    upstream.commit_push("bulk runbooks")
    home = workspace(tmp_path)
    assert no_tty("--home", str(home), "source", "add", "handbook", str(upstream.remote)).code == 0
    ran = on_tty("--home", str(home), "source", "sync", "handbook")
    assert ran.code == 0, ran
    done, total = phases(ran.tty)["syncing"]
    assert done == total >= 12, ran.tty
    assert "embedding" not in ran.tty
    line = next(x for x in ran.stdout.splitlines() if x.startswith("vectors:"))
    assert "not waited for" in line and "`gitkb status`" in line and "`gitkb embeddings build`" in line, line
    assert "()" not in ran.stdout + ran.tty  # no Python call in what a person reads
    staged = no_tty(
        "--home",
        str(home),
        "propose",
        "handbook",
        "runbooks/rotate-api-keys.md",
        "--search",
        "every 90 days",
        "--replace",
        "every 60 days",
    )
    assert staged.code == 0, staged.stderr
    first = staged.stdout.splitlines()[0]
    assert "`gitkb pr open SOURCE` sends it for review" in first and "open_kb_pull_request" not in first, (
        first
    )


def test_no_wait_says_how_to_follow_in_cli_words(home: Path, tmp_path: Path) -> None:
    ran = no_tty("--home", str(home), "add", "kb", str(pages(tmp_path / "pages", 12)), "--no-wait")
    assert ran.code == 0, ran.stderr
    line = next(x for x in ran.stdout.splitlines() if x.startswith("vectors:"))
    assert "not waited for" in line and "`gitkb status`" in line, line


def test_queued_jobs_and_warnings_speak_cli_words(capsys: pytest.CaptureFixture[str]) -> None:
    from gitkb.cli.output import warnings_of
    from gitkb.cli.progress import job_line

    line = job_line({"status": "working", "job_id": "job_42", "kind": "reindex"})
    assert "`gitkb jobs wait job_42`" in line and "`gitkb status`" in line and "not waited for" in line
    # semantic.py's warning while an index's vectors build
    warnings_of(
        {
            "Warnings": [
                "index 'kb': vectors are still building (3 change(s) pending); "
                "searched by keyword for now (build_embeddings() waits for them)"
            ]
        }
    )
    err = capsys.readouterr().err
    assert "`gitkb embeddings build` waits for them" in err and "build_embeddings" not in err


def test_jobs_wait_shows_the_job_then_its_vectors(home: Path, tmp_path: Path) -> None:
    added = no_tty(
        "--home", str(home), "--json", "add", "kb", str(pages(tmp_path / "pages", 20)), "--no-wait"
    )
    assert added.code == 0, added.stderr
    assert json.loads(added.stdout)["vectors"] == "pending"  # the add's process stopped its embedder at exit
    job = json.loads(no_tty("--home", str(home), "--json", "jobs", "list").stdout)["Jobs"][0]
    assert job["status"] == "completed" and job["result"]["vectors"] == "pending"
    ran = on_tty("--home", str(home), "jobs", "wait", job["job_id"])
    assert ran.code == 0, ran
    seen = phases(ran.tty)
    assert seen[f"job {job['job_id']}"] == (20, 20), ran.tty
    n = job["result"]["vectors_total"]
    assert seen["embedding"] == (n, n), ran.tty
    assert json.loads(ran.stdout[ran.stdout.index("{") :])["vectors"] == "ready"


def test_rechunk_and_embeddings_build_show_their_phases(home: Path, tmp_path: Path) -> None:
    assert no_tty("--home", str(home), "add", "kb", str(pages(tmp_path / "pages", 10))).code == 0
    ran = on_tty(
        "--home", str(home), "index", "rechunk", "kb", "--chunk-size", "128", "--chunk-overlap", "16"
    )
    assert ran.code == 0, ran
    seen = phases(ran.tty)
    assert seen["re-chunking"][0] == seen["re-chunking"][1] > 0, ran.tty
    done, total = seen["embedding"]
    assert done == total > 100, ran.tty
    built = on_tty("--home", str(home), "embeddings", "build", "--force")
    assert built.code == 0, built
    chunks = json.loads(no_tty("--home", str(home), "--json", "index", "list").stdout)["IndexDetails"]["kb"][
        "chunk_count"
    ]
    assert phases(built.tty)["embedding"] == (chunks, chunks), built.tty
