"""The Python library: ``Workspace(home)``.

Every public method returns a JSON-serialisable dict with ``Success`` and, on
failure, ``Error`` (one sentence) and ``code`` (stable). It never raises for a
domain error and never returns a traceback; unexpected failures are logged to
``<home>/logs/gitkb.log`` and reported with code ``internal``.
"""

from __future__ import annotations

import atexit
import functools
import json
import logging
import os
import subprocess
import sys
import traceback
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gitkb.core.config import Settings, load_settings
from gitkb.core.errors import GitkbError
from gitkb.services import actions, jobs, knowledge, scope, status, ttl
from gitkb.services.context import Context
from gitkb.services.writer import become_writer

log = logging.getLogger("gitkb")
F = TypeVar("F", bound=Callable[..., dict[str, Any]])


def internal_error_response(home: Path, exc: BaseException) -> dict[str, Any]:
    logdir = home / "logs"
    try:
        logdir.mkdir(parents=True, exist_ok=True)
        with open(logdir / "gitkb.log", "a", encoding="utf-8") as fh:
            fh.write("".join(traceback.format_exception(exc)))
    except OSError:  # pragma: no cover
        pass
    return {
        "Success": False,
        "Error": f"internal error ({type(exc).__name__}: {exc}); details in {logdir / 'gitkb.log'}",
        "code": "internal",
    }


def tool(fn: F) -> F:
    """Translate domain errors into the response shape; never let a traceback out."""

    @functools.wraps(fn)
    def wrapper(self: Workspace, *args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return fn(self, *args, **kwargs)
        except GitkbError as exc:
            return exc.to_response()
        except Exception as exc:  # noqa: BLE001 - the contract: no traceback leaves a tool
            return internal_error_response(self.settings.home, exc)

    return wrapper  # type: ignore[return-value]


_resumers: list[subprocess.Popen[bytes]] = []  # detached gitkb.resume processes (kept so none is reported lost)


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
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env, start_new_session=True,
            )  # fmt: skip
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


class Workspace:
    """One gitkb installation: catalog, keyword index, vectors, managed repos under ``home``."""

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        *,
        settings: Settings | None = None,
        resume_in_background: bool = False,
        **overrides: Any,
    ) -> None:
        self.settings = settings or load_settings(home, **overrides)
        self._overrides = {} if settings is not None else overrides
        self.ctx = Context(self.settings)
        import gitkb.services.job_kinds  # noqa: F401 - registers the job kinds

        # Opening never waits for derived work: recovery requeues, the catch-ups run on threads.
        become_writer(self.ctx)
        self._resumed = False  # work a crash left (requeued jobs, vectors behind) resumes in this process
        if self.ctx.is_writer:
            self._resumed = bool(self.ctx.writer.recovered["requeued"]) | self._resume_embeddings()
        self._resume_in_background = resume_in_background
        self._closed = False
        _open_workspaces.add(self)

    @property
    def home(self) -> Path:
        return self.settings.home

    def close(self) -> None:
        """Stop the background threads (a job they run goes back to the queue) and close the stores.

        When this process resumed a crash's work and closes before finishing it, the next opener
        resumes it; with ``resume_in_background=True`` (the CLI) a detached ``gitkb.resume`` process
        finishes it now.
        """
        from gitkb.services.writer import work_left

        if self._closed:
            return
        self._closed = True
        _open_workspaces.discard(self)
        hand_off = self._resume_in_background and self._resumed and self.ctx.is_writer and work_left(self.ctx)
        self.ctx.close()
        if hand_off:
            _start_resume(self.home, self._overrides)

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @tool
    def document_index(self, action: str, **params: Any) -> dict[str, Any]:
        """The action API (CREATE_INDEX, ADD_DOCUMENTS, SEARCH, ...); see ``gitkb.services.actions``.

        Reads run here; writes go through the single writer as a job and this
        call returns when the job is done (searchable by keyword).
        """
        name = actions.admit(self.ctx, action, params)
        if actions.is_read(name):
            return actions.run_action(self.ctx, name, params)
        progress = params.pop("progress", None)
        result = jobs.run_inline(self.ctx, "action", {"action": name, "params": params}, progress=progress)
        return result

    # -- long work promoted to jobs (MCP, HTTP, CLI --no-wait) -----------------

    @tool
    def promoted(self, method: str, /, **params: Any) -> dict[str, Any]:
        """Run a long call as a job; answer inline if it finishes within the promotion threshold,
        else ``{"Success": True, "status": "working", "job_id": ..., "poll_with": "get_job_result"}``.

        ``method`` is ``document_index`` (with ``action``) or a job kind such as ``reindex``.
        ``wait`` (seconds) overrides the threshold; ``caller`` names who asks, for the per-caller limit.
        """
        wait_s = params.pop("wait", None)
        caller = params.pop("caller", None)
        if method == "document_index":
            action = params.pop("action", None)
            name = actions.admit(self.ctx, action, params)
            if actions.is_read(name):
                return actions.run_action(self.ctx, name, params)
            kind, job_params = "action", {"action": name, "params": params}
        else:
            kind, job_params = method, params
        job = jobs.submit(self.ctx, kind, job_params, caller=caller)
        threshold = self.settings.promote_after_seconds if wait_s is None else float(wait_s)
        done = jobs.wait(self.ctx, job.id, timeout=threshold)
        if done.state == "completed":
            return {"Success": True, **(done.result or {}), "job_id": done.id}
        if done.state in ("failed", "cancelled"):
            raise jobs.error_from_row(done)
        return {
            "Success": True,
            "status": "working",
            "job_id": done.id,
            "kind": done.kind,
            "poll_with": "get_job_result",
            "Message": f"{done.kind} is running in the background; poll get_job_result with job_id {done.id}",
        }

    # -- status and jobs ----------------------------------------------------

    @tool
    def get_index_status(self) -> dict[str, Any]:
        """queryable/building/failed, queue depth, in-flight job, dirty counts, skipped files."""
        return {"Success": True, **status.index_status(self.ctx)}

    @tool
    def get_job_result(self, job_id: str) -> dict[str, Any]:
        """``{Success, job_id, kind, status, progress, result?, error?}``."""
        return {"Success": True, **jobs.job_result(self.ctx, job_id)}

    @tool
    def list_jobs(self, limit: int = 50, state: str | None = None) -> dict[str, Any]:
        return {"Success": True, **jobs.list_jobs(self.ctx, limit=limit, state=state)}

    @tool
    def cancel_job(self, job_id: str) -> dict[str, Any]:
        return {"Success": True, **jobs.cancel(self.ctx, job_id)}

    @tool
    def wait_job(self, job_id: str, timeout: float | None = None, progress: Any = None) -> dict[str, Any]:
        """Block until the job finishes (or ``timeout``); returns get_job_result's dict."""
        jobs.job_result(self.ctx, job_id)  # not_found check
        jobs.wait(self.ctx, job_id, timeout=timeout, progress=progress)
        return {"Success": True, **jobs.job_result(self.ctx, job_id)}

    @tool
    def reindex(self, force: bool = False, index_name: str | None = None, progress: Any = None) -> dict[str, Any]:
        """Bring directory-fed indexes up to date with the disk (``force``: parse everything again)."""
        params = {"force": bool(force), "index_name": index_name}
        return {"Success": True, **jobs.run_inline(self.ctx, "reindex", params, progress=progress)}

    # -- git sources, proposals, reviews, forges (services.sources, .proposals, .review) --

    @tool
    def source_add(
        self,
        name: str,
        url: str,
        branch: str = "main",
        documents_root: str = "docs",
        index: str | list[str] | None = None,
        include: list[str] | tuple[str, ...] = (),
        exclude: list[str] | tuple[str, ...] = (),
        forge: dict[str, Any] | None = None,
        auth: dict[str, Any] | None = None,
        webhook_secret: str | None = None,
    ) -> dict[str, Any]:
        """Register a git repository feeding one or more indexes (created when missing); clones it.

        ``webhook_secret`` verifies this source's forge webhooks (else ``GITKB_WEBHOOK_SECRET``)."""
        from gitkb.services import sources, webhook_intake

        out = sources.add_source(
            self.ctx, name, url, branch=branch, documents_root=documents_root, index=index,
            include=include, exclude=exclude, forge=forge, auth=auth,
        )  # fmt: skip
        if webhook_secret:
            webhook_intake.set_webhook_secret(self.ctx, name, webhook_secret)
            out["webhook_secret"] = "set"
        return {"Success": True, **out}

    @tool
    def source_list(self) -> dict[str, Any]:
        from gitkb.services import sources

        return {"Success": True, **sources.list_sources(self.ctx)}

    @tool
    def source_sync(
        self, source: str, commit: str | None = None, full: bool = False, progress: Any = None
    ) -> dict[str, Any]:
        """Fetch and re-index only what changed since the last synced commit (a job of the writer)."""
        from gitkb.services import sources

        params = {"source": source, "commit": commit, "full": bool(full)}
        return {"Success": True, **jobs.run_inline(self.ctx, sources.SYNC_JOB_KIND, params, progress=progress)}

    @tool
    def source_remove(self, source: str, keep_documents: bool = False) -> dict[str, Any]:
        from gitkb.services import sources

        return {"Success": True, **sources.remove_source(self.ctx, source, keep_documents=keep_documents)}

    @tool
    def propose_kb_edit(
        self, source_id_or_index: str, relative_path: str, content: str = "", search: str = "",
        replace: str = "", note: str = "",
    ) -> dict[str, Any]:  # fmt: skip
        """Stage an edit (whole content, or exact-once search/replace) on the source's proposal branch."""
        from gitkb.services import proposals

        return {"Success": True, **proposals.propose_kb_edit(
            self.ctx, source_id_or_index, relative_path, content, search, replace, note,
        )}  # fmt: skip

    @tool
    def propose_kb_delete(self, source_id_or_index: str, relative_path: str, note: str = "") -> dict[str, Any]:
        from gitkb.services import proposals

        return {"Success": True, **proposals.propose_kb_delete(self.ctx, source_id_or_index, relative_path, note)}

    @tool
    def propose_kb_rename(
        self, source_id_or_index: str, relative_path: str, new_relative_path: str, note: str = ""
    ) -> dict[str, Any]:
        from gitkb.services import proposals

        return {"Success": True, **proposals.propose_kb_rename(
            self.ctx, source_id_or_index, relative_path, new_relative_path, note,
        )}  # fmt: skip

    @tool
    def list_proposals(self, source: str | None = None, state: str = "staged") -> dict[str, Any]:
        from gitkb.services import proposals

        return {"Success": True, **proposals.list_proposals(self.ctx, source, state)}

    @tool
    def show_proposal(self, proposal_id: str) -> dict[str, Any]:
        from gitkb.services import proposals

        return {"Success": True, **proposals.show_proposal(self.ctx, proposal_id)}

    @tool
    def discard_proposal(self, proposal_id: str) -> dict[str, Any]:
        from gitkb.services import proposals

        return {"Success": True, **proposals.discard_proposal(self.ctx, proposal_id)}

    @tool
    def cite_check(self, chunk_id: str) -> dict[str, Any]:
        """Is the cited text still at the cited commit and lines, and still current at the branch head?"""
        from gitkb.services.sources.cite import cite_check

        return {"Success": True, **cite_check(self.ctx, chunk_id)}

    @tool
    def open_kb_pull_request(
        self, source_id_or_index: str, target_index: str = "", title: str = "", body: str = "",
        commit_message: str = "",
    ) -> dict[str, Any]:  # fmt: skip
        """Ask for review of the staged proposals: returns review_id, review_state 'pending', changed_files."""
        from gitkb.services import review

        return {"Success": True, **review.open_kb_pull_request(
            self.ctx, source_id_or_index, target_index, title, body, commit_message,
        )}  # fmt: skip

    @tool
    def list_reviews(self, state: str | None = None, source: str | None = None) -> dict[str, Any]:
        """Reviews, pending first (``Reviews``)."""
        from gitkb.services import review

        return {"Success": True, **review.list_reviews(self.ctx, state, source)}

    @tool
    def show_review(self, review_id: str) -> dict[str, Any]:
        from gitkb.services import review

        return {"Success": True, **review.show_review(self.ctx, review_id)}

    @tool
    def approve_review(self, review_id: str, reviewer: str = "operator") -> dict[str, Any]:
        """Push the staged branch with a lease and open/update the PR/MR: number, url, changed_files."""
        from gitkb.services import review

        return {"Success": True, **review.approve_review(self.ctx, review_id, reviewer=reviewer)}

    @tool
    def deny_review(self, review_id: str, reason: str, reviewer: str = "operator") -> dict[str, Any]:
        from gitkb.services import review

        return {"Success": True, **review.deny_review(self.ctx, review_id, reason, reviewer=reviewer)}

    @tool
    def forge_merge(self, source: str, number: int, wait: bool = True) -> dict[str, Any]:
        """Local forge: merge change request NUMBER into its base, then sync (like a webhook would)."""
        from gitkb.services import sources

        return {"Success": True, **sources.forge_merge(self.ctx, source, number, wait=wait)}

    @tool
    def forge_close(self, source: str, number: int) -> dict[str, Any]:
        """Local forge: close change request NUMBER unmerged (its reviews become 'closed')."""
        from gitkb.services import sources

        return {"Success": True, **sources.forge_close(self.ctx, source, number)}

    @tool
    def list_pull_requests(self, source: str, state: str | None = None) -> dict[str, Any]:
        from gitkb.services import sources

        return {"Success": True, **sources.list_pull_requests(self.ctx, source, state)}

    @tool
    def list_audit(self, target: str | None = None, limit: int = 100) -> dict[str, Any]:
        """The audit log, newest first: who, when, what, result."""
        from gitkb.services import audit

        return {"Success": True, **audit.list_audit(self.ctx, target=target, limit=limit)}

    # -- knowledge bases, agents, agent-scoped calls (services.knowledge, services.scope) --

    @tool
    def kb_create(self, name: str, indexes: list[str]) -> dict[str, Any]:
        """A knowledge base over these indexes (names or kidx_ ids); it stores the ids."""
        return {"Success": True, **knowledge.kb_create(self.ctx, name, indexes)}

    @tool
    def kb_list(self) -> dict[str, Any]:
        return {"Success": True, **knowledge.kb_list(self.ctx)}

    @tool
    def kb_delete(self, name: str, force: bool = False) -> dict[str, Any]:
        """Refused while agents use it, unless ``force`` (which unassigns it from them)."""
        return {"Success": True, **knowledge.kb_delete(self.ctx, name, force=force)}

    @tool
    def agent_assign(
        self, agent_id: str, kbs: list[str], read_only: bool = False, default_top_k: int | None = None
    ) -> dict[str, Any]:
        """Bind an agent to knowledge bases (read-only turns its write tools off for them)."""
        return {
            "Success": True,
            **knowledge.agent_assign(self.ctx, agent_id, kbs, read_only=read_only, default_top_k=default_top_k),
        }

    @tool
    def agent_unassign(self, agent_id: str, kbs: list[str]) -> dict[str, Any]:
        return {"Success": True, **knowledge.agent_unassign(self.ctx, agent_id, kbs)}

    @tool
    def agent_show(self, agent_id: str) -> dict[str, Any]:
        return {"Success": True, **knowledge.agent_show(self.ctx, agent_id)}

    @tool
    def agent_usage(self, agent_id: str) -> dict[str, Any]:
        """Query-embedding events of an agent: count, tokens, duration."""
        return {"Success": True, **knowledge.agent_usage(self.ctx, agent_id)}

    @tool
    def list_knowledge_bases(self, agent_id: str | None = None) -> dict[str, Any]:
        """Every knowledge base, or only an agent's (with its read-only flag per binding)."""
        return {"Success": True, **knowledge.list_knowledge_bases(self.ctx, agent_id)}

    @tool
    def search_index(
        self,
        query: str,
        indexes: list[str] | None = None,
        top_k: int | None = None,
        *,
        tenant: str | None = None,
        tiers: list[str] | None = None,
        mode: str | None = None,
        agent_id: str | None = None,
    ) -> dict[str, Any]:
        """Search with citations, limited to the agent's indexes when ``agent_id`` is given."""
        sc = scope.load_scope(self.ctx, agent_id)
        return scope.search_index(
            self.ctx, sc, query, indexes=indexes, top_k=top_k, tenant=tenant, tiers=tiers, mode=mode
        )

    @tool
    def document_index_as(
        self, agent_id: str | None, action: str, /, promote: bool = False, **params: Any
    ) -> dict[str, Any]:
        """``document_index`` within an agent's scope; ``promote`` runs long writes as jobs."""
        sc = scope.load_scope(self.ctx, agent_id)
        plan = scope.plan_action(self.ctx, sc, action, params)
        if plan.answer is not None:
            return plan.answer
        if promote:
            caller = scope.job_caller(sc)
            out = self.promoted("document_index", action=plan.action, caller=caller, **plan.params)
        else:
            out = self.document_index(plan.action, **plan.params)
        return scope.finish_action(self.ctx, sc, plan, out)

    @tool
    def purge_expired(self) -> dict[str, Any]:
        """Delete documents past their TTL (through the writer when the job kind is registered)."""
        if "purge_expired" in jobs.JOB_KINDS:
            return {"Success": True, **jobs.run_inline(self.ctx, "purge_expired", {})}
        with self.ctx.write_lock:
            return {"Success": True, **ttl.purge_expired(self.ctx)}

    # -- embeddings ------------------------------------------------------------

    def _resume_embeddings(self) -> bool:
        """Vectors that lag behind the change log (a crash, another process) catch up in the background."""
        from gitkb.services import embeddings

        try:
            return embeddings.resume_if_pending(self.ctx)
        except Exception as exc:  # noqa: BLE001 - opening a workspace never fails on the derived vectors
            log.warning("could not resume background embedding: %s", exc)
            return False

    @tool
    def build_embeddings(self, force: bool = False, progress: Any = None) -> dict[str, Any]:
        """Block until every chunk has its vector (``force``: re-embed everything); returns ``chunks_embedded``."""
        result = jobs.run_inline(self.ctx, "build_embeddings", {"force": bool(force)}, progress=progress)
        return {"Success": True, **result}

    @tool
    def embeddings_status(self) -> dict[str, Any]:
        """available, provider, model, identity, fingerprint, chunk_count, pending, collections, path."""
        from gitkb.services import embeddings

        return {"Success": True, **embeddings.embeddings_status(self.ctx)}

    @tool
    def reembed(self, index_name: str | None = None, progress: Any = None) -> dict[str, Any]:
        """Re-embed an index (default: every index stranded by a model change) into its active identity."""
        result = jobs.run_inline(self.ctx, "reembed", {"index_name": index_name}, progress=progress)
        return {"Success": True, **result}

    @tool
    def set_embedding_identity(self, provider: str, model: str | None = None) -> dict[str, Any]:
        """Change the workspace's active embedding identity (indexes with vectors elsewhere need a re-embed)."""
        from gitkb.services import identity

        return {"Success": True, **identity.set_active_identity(self.ctx, provider, model)}

    # -- evaluation (services.evaluation) ------------------------------------

    @tool
    def eval_beir(
        self,
        path: str,
        split: str = "train",
        mode: str | None = None,
        index_name: str | None = None,
        chunk_strategy: str | None = None,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        progress: Any = None,
    ) -> dict[str, Any]:
        """nDCG@10, Recall@10/100, MRR@10 of SEARCH on a BEIR folder; ``progress(stage, done, total)``."""
        from gitkb.services import evaluation

        return {"Success": True, **evaluation.eval_beir(
            self.ctx, path, split=split, mode=mode, index_name=index_name, chunk_strategy=chunk_strategy,
            chunk_size=chunk_size, chunk_overlap=chunk_overlap, progress=progress,
        )}

    @tool
    def eval_qa(
        self,
        path: str,
        mode: str | None = None,
        index_name: str | None = None,
        ask: bool = True,
        progress: Any = None,
    ) -> dict[str, Any]:
        """Recall@1/5/10 and MRR@10 of the gold document, and ASK's gold-citation rate, on a QA folder."""
        from gitkb.services import evaluation

        return {"Success": True, **evaluation.eval_qa(
            self.ctx, path, mode=mode, index_name=index_name, ask=ask, progress=progress
        )}
