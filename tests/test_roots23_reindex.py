"""A remote reindex walks only what was checked, also when its job waited in the queue.

roots22 refused a remote REINDEX whose recorded roots lie outside ``[server] allowed_roots``, but
checked them when the call was queued: the job walked the roots recorded when it ran. A root the
operator recorded (the library, the CLI) while the remote job waited was walked by it, and the
files there named in its answer. Now the job carries the roots it is held to (``held_to`` in its
persisted parameters) and checks again when it runs, before reading: the whole job is refused
(``forbidden``, ``details.refused_roots`` by index), nothing of the outside root read or named.
A restart keeps the restriction (the parameters are the job row's).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from gitkb import Workspace
from gitkb.core.config import load_settings
from gitkb.http import create_app
from gitkb.services.runtime import jobs
from helpers import ok, wait_until
from test_caps21_mcp import _data, _session, mcp_over_http

HOLD = "roots23_hold"


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "a.md").write_text("# A\n\nInside the root: rollback checklist.\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "s.md").write_text("# S\n\nOutside the root: the release calendar.\n")
    return {"allowed": allowed, "outside": outside}


def _roots(tree: dict[str, Path]) -> str:
    return f'[server]\nallowed_roots = ["{tree["allowed"]}"]\n'


class Hold:
    """A job kind that holds the writer until a reindex is queued behind it; then the operator
    (the library Workspace, the operator's rights) records a root outside the allowed ones for
    index ``in``, and a file appears there that only a reindex would read. ``until_stopped``:
    it then holds on until the process stops (the job goes back to the queue)."""

    def __init__(self, ws: Workspace, tree: dict[str, Path], *, until_stopped: bool = False) -> None:
        self.ws, self.tree, self.until_stopped = ws, tree, until_stopped
        self.added = threading.Event()

    def __call__(self, ctx: Any, params: dict[str, Any], progress: Any) -> dict[str, Any]:
        if self.added.is_set():  # run again after a restart: nothing more to do
            return {"Message": "held"}
        wait_until(
            lambda: [j for j in ok(self.ws.list_jobs(state="queued"))["Jobs"] if j["kind"] == "reindex"],
            timeout=30,
            interval=0.02,
            what="the remote reindex queued",
        )
        ok(self.ws.document_index("ADD_DOCUMENTS", index_name="in", filepath=str(self.tree["outside"])))
        (self.tree["outside"] / "new.md").write_text("# New\n\nthe payroll export\n")
        self.added.set()
        while self.until_stopped:
            progress(0, 1)  # raises once the writer is asked to stop: this job is requeued
            time.sleep(0.05)
        return {"Message": "held"}


@pytest.fixture
def hold_kind() -> Iterator[None]:
    yield
    jobs.remove_kind(HOLD)


def _fill(ws: Workspace, tree: dict[str, Path]) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="in"))
    ok(ws.document_index("ADD_DOCUMENTS", index_name="in", filepath=str(tree["allowed"])))


def _files(ws: Workspace) -> list[str]:
    listed = ok(ws.document_index("LIST_DOCUMENTS", index_name="in"))
    return sorted(str(d.get("filepath") or d.get("path")) for d in listed["Documents"])


def _refused_whole(answer: dict[str, Any], tree: dict[str, Path]) -> None:
    """The job's answer: forbidden, the outside root named as refused, no file of it named."""
    assert answer.get("code") == "forbidden", answer
    details = answer.get("details", answer)
    assert details["refused_roots"] == {"in": [str(tree["outside"])]}, answer
    assert details["allowed_roots"] == [str(tree["allowed"])], answer
    assert "gitkb reindex" in " ".join(answer["next_steps"]), answer
    assert "new.md" not in json.dumps(answer)


def _payroll_unread(ws: Workspace) -> None:
    found = ok(ws.document_index("SEARCH", index_name="in", query="payroll", mode="keyword"))["Results"]
    assert found == []
    assert not any(f.endswith("new.md") for f in _files(ws))


def _job_answer(c: TestClient, r: Any) -> dict[str, Any]:
    """The HTTP answer, or (promoted: working) the finished job's error."""
    body = r.json()
    if body.get("status") != "working":
        return body["error"] if isinstance(body.get("error"), dict) else body  # type: ignore[no-any-return]
    job = wait_until(
        lambda: (j := c.get(f"/jobs/{body['job_id']}").json())["status"] in ("completed", "failed") and j,
        timeout=30,
        interval=0.05,
        what="the reindex job to finish",
    )
    assert job["status"] == "failed", job
    return job["result"]  # type: ignore[no-any-return]


def test_a_root_recorded_while_the_remote_reindex_waits_is_not_walked(
    make_client: Any, tree: dict[str, Path], hold_kind: None
) -> None:
    c = make_client(_roots(tree))
    ws = c.app.state.gitkb.workspace
    _fill(ws, tree)
    hold = Hold(ws, tree)
    jobs.add_kind(HOLD, jobs.JobKind(hold))
    assert ok(ws.promoted(HOLD, wait=0))["status"] == "working"  # holds the writer
    r = c.post("/reindex", json={"index_name": "in"})  # checked now: only the allowed root is recorded
    assert hold.added.is_set()
    assert r.status_code in (200, 403), r.json()
    _refused_whole(_job_answer(c, r), tree)
    _payroll_unread(ws)
    # the operator's own reindex (the library) still walks every root
    assert ok(ws.reindex(index_name="in"))["added"] == 1
    assert any(f.endswith("new.md") for f in _files(ws))


def test_mcp_over_http_reindex_is_checked_again_when_its_job_runs(
    ws: Workspace, tree: dict[str, Path], hold_kind: None
) -> None:
    _fill(ws, tree)
    hold = Hold(ws, tree)
    jobs.add_kind(HOLD, jobs.JobKind(hold))
    assert ok(ws.promoted(HOLD, wait=0))["status"] == "working"
    with mcp_over_http(ws, None, _roots(tree)) as url:
        _, (got,) = _session(url, [("reindex", {"index_name": "in"})])
    answer = _data(got)
    if answer.get("status") == "working":  # promoted: the job's own answer
        done = jobs.wait(ws.ctx, answer["job_id"], timeout=30)
        assert done.state == "failed", done
        answer = done.result or {}
    else:
        assert got.is_error, got.content[0].text
    assert hold.added.is_set()
    _refused_whole(answer, tree)
    _payroll_unread(ws)


def test_a_restart_keeps_the_queued_remote_reindex_held(
    home: Path, tree: dict[str, Path], hold_kind: None
) -> None:
    """The server stops while the remote reindex waits; the next opener (the library) runs it:
    still held to the roots of the server that queued it."""
    home.mkdir(parents=True)
    (home / "gitkb.toml").write_text(_roots(tree))
    settings = load_settings(
        home, embedding_provider="hashing", embedding_model="hashing-384", promote_after_seconds=0.2
    )
    with TestClient(create_app(settings), client=("127.0.0.1", 1)) as c:
        ws = c.app.state.gitkb.workspace
        _fill(ws, tree)
        hold = Hold(ws, tree, until_stopped=True)
        jobs.add_kind(HOLD, jobs.JobKind(hold))
        assert ok(ws.promoted(HOLD, wait=0))["status"] == "working"
        r = c.post("/reindex", json={"index_name": "in"})
        assert r.status_code == 200 and r.json()["status"] == "working", r.json()
        job_id = r.json()["job_id"]
        wait_until(hold.added.is_set, timeout=30, interval=0.02, what="the outside root recorded")
    with Workspace(home, embedding_provider="hashing", embedding_model="hashing-384") as w:
        done = jobs.wait(w.ctx, job_id, timeout=30)
        assert done.state == "failed", done
        _refused_whole(done.result or {}, tree)
        _payroll_unread(w)
