"""The Python library: ``Workspace(home)``, the composition root.

``Workspace`` is composed of one facade per flow (``job_tools``, ``change_tools``,
``knowledge_tools``, ``embedding_tools``, ``evaluation_tools``); every public method goes through ``base.tool``, which asks the
policy and builds the ``Success`` envelope.

Every public method returns a JSON-serialisable dict with ``Success`` and, on
failure, ``Error`` (one sentence) and ``code`` (stable). It never raises for a
domain error and never returns a traceback; unexpected failures are logged to
``<home>/logs/gitkb.log`` and reported with code ``internal``.
"""

from __future__ import annotations

import atexit
import copy
import functools
import json
import logging
import os
import subprocess
import sys
import weakref
from pathlib import Path
from typing import Any

from gitkb.core.action_table import ACTIONS as ACTION_TABLE
from gitkb.core.config import Settings, load_settings
from gitkb.core.errors import InvalidArgument
from gitkb.services.access import policy, principals
from gitkb.services.access.principals import Principal
from gitkb.services.context import Context
from gitkb.services.derived import embeddings
from gitkb.services.dispatch import actions, scope
from gitkb.services.dispatch.job_kinds import JOB_KINDS
from gitkb.services.runtime import jobs
from gitkb.services.runtime.embedding_worker import EmbeddingWorker
from gitkb.services.runtime.writer import become_writer, open_node, work_left
from gitkb.workspace import backup_tools
from gitkb.workspace.base import tool
from gitkb.workspace.change_tools import ChangeTools
from gitkb.workspace.embedding_tools import EmbeddingTools
from gitkb.workspace.evaluation_tools import EvaluationTools
from gitkb.workspace.job_tools import JobTools
from gitkb.workspace.knowledge_tools import KnowledgeTools

log = logging.getLogger("gitkb")


_resumers: list[
    subprocess.Popen[bytes]
] = []  # detached gitkb.resume processes (kept so none is reported lost)


def _start_resume(home: Path, overrides: dict[str, Any]) -> None:
    """Start ``python -m gitkb.resume`` detached (own session, no terminal); it exits when caught up."""
    try:
        args = json.dumps(overrides)
    except (TypeError, ValueError):
        args = "{}"
    env = {k: v for k, v in os.environ.items() if k != "GITKB_CRASH_AT"}
    try:
        (home / "logs").mkdir(parents=True, exist_ok=True)
        with open(home / "logs" / "resume.log", "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "gitkb.resume", str(home), args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                env=env,
                start_new_session=True,
            )
    except OSError as exc:  # the next opener resumes instead
        log.warning("could not start the background resume: %s", exc)
        return
    _resumers[:] = [p for p in _resumers if p.poll() is None] + [proc]


_open_workspaces: weakref.WeakSet[Workspace] = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    """A script that never calls ``close()`` still exits cleanly: its background threads are stopped and
    joined here, before the interpreter tears down (the embedder's native thread pool aborts the process,
    exit 134, when it is still computing then)."""
    for ws in list(_open_workspaces):
        try:
            ws.close()
        except Exception as exc:  # noqa: BLE001 - exiting anyway; the next opener recovers
            log.warning("closing a workspace at exit failed: %s", exc)


class Workspace(JobTools, ChangeTools, KnowledgeTools, EmbeddingTools, EvaluationTools):
    """One gitkb installation: catalog, keyword index, vectors, managed repos under ``home``."""

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        *,
        settings: Settings | None = None,
        resume_in_background: bool = False,
        catalog_url: str | None = None,
        **overrides: Any,
    ) -> None:
        self.settings = settings or load_settings(home, catalog_url=catalog_url, **overrides)
        self.principal: Principal = principals.local()
        self._view = False
        self._overrides = {} if settings is not None else overrides
        self.ctx = Context(self.settings)
        self.ctx.take_lease = functools.partial(become_writer, self.ctx)  # the runtime, handed in
        self.ctx.make_embedding_worker = EmbeddingWorker
        # a server, the MCP server, a library caller: the chunking worker outlives one ingest (the CLI's
        # one-shot commands, resume_in_background, start and end one per ingest)
        self.ctx.keep_chunk_worker = not resume_in_background

        jobs.load_kinds(JOB_KINDS)

        # Opening never waits for derived work: recovery requeues, the catch-ups run on threads.
        open_node(self.ctx)  # the node's row, the writer lease when it is free, the heartbeat
        self._resumed = False  # work a crash left (requeued jobs, vectors behind) resumes in this process
        if self.ctx.is_writer and self.ctx.writer is not None:
            self._resumed = bool(self.ctx.writer.recovered["requeued"]) | self._resume_embeddings()
        self._resume_in_background = resume_in_background
        self._closed = False
        self._follow_checkouts()
        _open_workspaces.add(self)

    def close(self) -> None:
        """Stop the background threads (a job they run goes back to the queue) and close the stores.

        When this process resumed a crash's work and closes before finishing it, the next opener
        resumes it; with ``resume_in_background=True`` (the CLI) a detached ``gitkb.resume`` process
        finishes it now.
        """
        if self._view or self._closed:  # a principal's view closes nothing
            return
        self._closed = True
        _open_workspaces.discard(self)
        hand_off = self._resume_in_background and self._resumed and self.ctx.is_writer and work_left(self.ctx)
        self.ctx.close()
        if hand_off:
            _start_resume(self.home, self._overrides)

    def as_principal(self, principal: Principal) -> Workspace:
        """The same workspace, every call checked for ``principal`` (a token, an agent...).

        The view shares the open stores; closing it closes nothing. An agent's classes come from
        the modes of its bindings, read now."""
        if principal.is_agent:
            assert principal.agent_id is not None
            sc = scope.load_scope(self.ctx, principal.agent_id)
            principal = principals.agent(sc.agent_id or principal.agent_id, sc.classes)
        view = copy.copy(self)
        view.principal = principal
        view._view = True
        return view

    def held_to(self, roots: tuple[Path, ...]) -> Workspace:
        """The same view, its work held to ``roots`` of this server's disk (``[server]
        allowed_roots`` of an interface others reach): a reindex or sync it queues carries them and
        is refused, when queued and when it runs, where it would read outside (``reads_disk``)."""
        view = copy.copy(self)
        view.disk_roots = tuple(roots)
        view._view = True
        return view

    def as_agent(self, agent_id: str) -> Workspace:
        return self.as_principal(principals.agent(agent_id))

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @tool
    def document_index(self, action: str, **params: Any) -> dict[str, Any]:
        """The action API (CREATE_INDEX, ADD_DOCUMENTS, SEARCH, ...); see ``gitkb.services.dispatch.actions``.

        Reads run here; writes go through the single writer as a job and this
        call returns when the job is done (searchable by keyword).
        """
        return self._document_index(action, params, promote=False)

    def _document_index(
        self, action: Any, params: dict[str, Any], *, promote: bool, wait: Any = None
    ) -> dict[str, Any]:
        spec = policy.document_index_action(action)
        self._check(spec.name, params)
        sc = self._scope()
        plan = scope.plan_action(self.ctx, sc, spec.name, params)
        if plan.answer is not None:
            return plan.answer
        name = actions.admit(self.ctx, plan.action, plan.params)
        params = dict(plan.params)
        if actions.is_read(name):
            out = actions.run_action(self.ctx, name, params)
        elif promote:
            out = self._promote("action", {"action": name, "params": params}, wait)
        else:
            progress = params.pop("progress", None)
            out = jobs.run_inline(self.ctx, "action", {"action": name, "params": params}, progress=progress)
        return scope.finish_action(self.ctx, sc, plan, out)

    # -- long work promoted to jobs (MCP, HTTP, CLI --no-wait) -----------------

    @tool
    def promoted(self, method: str, /, **params: Any) -> dict[str, Any]:
        """Run a long call as a job; answer inline if it finishes within the promotion threshold,
        else ``{"Success": True, "status": "working", "job_id": ..., "poll_with": "get_job_result"}``.

        ``method`` is ``document_index`` (with ``action``) or a promotable action such as ``reindex``.
        ``wait`` (seconds) overrides the threshold.
        """
        wait_s = params.pop("wait", None)
        caller = params.pop("caller", None) if self.principal.is_local else None  # the operator names one
        if method == "document_index":
            return self._document_index(params.pop("action", None), params, promote=True, wait=wait_s)
        if method not in ACTION_TABLE and self.principal.is_local and jobs.kind_of(method) is not None:
            return self._promote(method, params, wait_s, caller)  # a job kind of the operator's own
        spec = policy.action(method)
        if not spec.promotable:
            raise InvalidArgument(f"{method} does not run as a job; call it directly")
        self._check(method, params)
        return self._promote(method, self._held(method, params), wait_s, caller)

    def _promote(
        self, kind: str, job_params: dict[str, Any], wait_s: Any, caller: str | None = None
    ) -> dict[str, Any]:
        job = jobs.submit(self.ctx, kind, job_params, caller=caller or self._caller())
        threshold = self.settings.promote_after_seconds if wait_s is None else float(wait_s)
        done = jobs.wait(self.ctx, job.id, timeout=threshold)
        if done.state == "completed":
            return {**(done.result or {}), "job_id": done.id}
        if done.state in ("failed", "cancelled"):
            raise jobs.error_from_row(done)
        # Not waited for: if this process (the CLI) closes first, the job it queued, or began and
        # hands back at exit, is finished by the detached resume like a crash's work, not left queued.
        self._resumed = True
        return {
            "status": "working",
            "job_id": done.id,
            "kind": done.kind,
            "poll_with": "get_job_result",
            "Message": f"{done.kind} is running in the background; poll get_job_result with job_id {done.id}",
        }

    backup, restore = tool(backup_tools.backup), tool(backup_tools.restore)  # workspace/backup_tools.py

    def _resume_embeddings(self) -> bool:
        """Vectors that lag behind the change log (a crash, another process) catch up in the background."""
        try:
            return embeddings.resume_if_pending(self.ctx)
        except Exception as exc:  # noqa: BLE001 - opening a workspace never fails on the derived vectors
            log.warning("could not resume background embedding: %s", exc)
            return False
