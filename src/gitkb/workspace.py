"""The Python library: ``Workspace(home)``.

Every public method returns a JSON-serialisable dict with ``Success`` and, on
failure, ``Error`` (one sentence) and ``code`` (stable). It never raises for a
domain error and never returns a traceback; unexpected failures are logged to
``<home>/logs/gitkb.log`` and reported with code ``internal``.
"""

from __future__ import annotations

import atexit
import copy
import functools
import inspect
import json
import logging
import os
import subprocess
import sys
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gitkb import workspace_backup
from gitkb.core.action_table import ACTIONS as ACTION_TABLE
from gitkb.core.config import Settings, load_settings
from gitkb.core.errors import Forbidden, GitkbError, InvalidArgument, NotFound, write_crash_log
from gitkb.services import evaluation
from gitkb.services.access import knowledge, policy, principals
from gitkb.services.access.principals import Principal
from gitkb.services.changes import audit, checkouts, proposals, review, webhook_intake
from gitkb.services.changes.checkouts import refresh_moved
from gitkb.services.changes.sources import merges, registry, sync
from gitkb.services.changes.sources.cite import cite_check
from gitkb.services.context import Context
from gitkb.services.derived import embeddings, identity
from gitkb.services.dispatch import actions, scope, scoped_search
from gitkb.services.dispatch.job_kinds import JOB_KINDS
from gitkb.services.operations import metrics, status
from gitkb.services.runtime import jobs, vector_wait
from gitkb.services.runtime.embedding_worker import EmbeddingWorker
from gitkb.services.runtime.writer import become_writer, open_node, work_left

log = logging.getLogger("gitkb")
F = TypeVar("F", bound=Callable[..., dict[str, Any]])


def internal_error_response(home: Path, exc: BaseException) -> dict[str, Any]:
    write_crash_log(home, exc)
    return {
        "Success": False,
        "Error": f"internal error ({type(exc).__name__}: {exc}); details in {home / 'logs' / 'gitkb.log'}",
        "code": "internal",
    }


def tool(fn: F) -> F:
    """Envelope the method's dict (``{"Success": True, **out}``; the method returns the service's
    dict as is), translate domain errors into the response shape; never let a traceback out.

    Before the method runs, the policy checks the call (``gitkb.services.access.policy``): the
    method's name is its action in the action table, the arguments are its parameters, and the
    Workspace's principal must hold its class. ``document_index`` and ``promoted`` check the
    action they are given instead.
    """
    name = fn.__name__
    sig = inspect.signature(fn)
    dispatches = name in ("document_index", "promoted")

    @functools.wraps(fn)
    def wrapper(self: Workspace, *args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            if not dispatches:
                self._check(name, _bound(sig, name, self, args, kwargs))
            return {"Success": True, **fn(self, *args, **kwargs)}  # the one place a success is enveloped
        except GitkbError as exc:
            return exc.to_response()
        except Exception as exc:  # noqa: BLE001 - the contract: no traceback leaves a tool
            return internal_error_response(self.settings.home, exc)

    return wrapper  # type: ignore[return-value]


def _bound(sig: inspect.Signature, name: str, ws: Any, args: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments of one call by parameter name; unknown or missing ones are ``invalid_argument``."""
    try:
        bound = sig.bind(ws, *args, **kwargs)
    except TypeError as exc:
        allowed = [p for p in sig.parameters if p not in ("self", "progress")]
        unknown = sorted(set(kwargs) - set(sig.parameters))
        what = f"does not take {', '.join(unknown)}" if unknown else f"was called wrongly ({exc})"
        raise InvalidArgument(
            f"{name} {what}; it takes: {', '.join(allowed) or 'nothing'}", details={"unknown_params": unknown}
        ) from None
    out = {k: v for k, v in bound.arguments.items() if k != "self"}
    return out


def _seq_range(value: Any) -> tuple[int, int]:
    if (
        not isinstance(value, list | tuple)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
    ):
        raise InvalidArgument(
            f"vectors_range must be [after_seq, upto_seq] as a write returned it, got {value!r}"
        )
    return int(value[0]), int(value[1])


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
        self.principal: Principal = principals.local()
        self._view = False
        self._overrides = {} if settings is not None else overrides
        self.ctx = Context(self.settings)
        self.ctx.take_lease = functools.partial(become_writer, self.ctx)  # the runtime, handed in
        self.ctx.make_embedding_worker = EmbeddingWorker

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

    @property
    def home(self) -> Path:
        return self.settings.home

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

    def as_agent(self, agent_id: str) -> Workspace:
        return self.as_principal(principals.agent(agent_id))

    def _check(self, name: str, params: dict[str, Any]) -> None:
        policy.check(self.principal, name, params)
        self._follow_checkouts()

    def _follow_checkouts(self) -> None:
        """This node's checkouts follow the synced commit, whichever node synced (one indexed query)."""
        try:
            refresh_moved(self.ctx)
        except Exception as exc:  # noqa: BLE001 - a checkout that cannot follow never fails a call
            log.warning("refreshing this node's checkouts failed: %s", exc)

    def _scope(self) -> scope.AgentScope:
        """The agent's scope for an agent principal, else the operator's (no limit)."""
        return scope.load_scope(self.ctx, self.principal.agent_id if self.principal.is_agent else None)

    def _reviewer(self, given: str) -> str:
        """Who decided: a token's name, never one the caller chose (the operator may name one)."""
        return given if self.principal.is_local else self.principal.name

    def _caller(self) -> str | None:
        """Who a job is recorded for (None for the local operator)."""
        return None if self.principal.is_local else self.principal.label

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
        return self._promote(method, params, wait_s, caller)

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

    # -- status and jobs ----------------------------------------------------

    @tool
    def get_index_status(self) -> dict[str, Any]:
        """queryable/building/failed, queue depth, in-flight job, dirty counts, skipped files."""
        return scope.filter_status(self.ctx, self._scope(), status.index_status(self.ctx))

    @tool
    def metrics(self) -> dict[str, Any]:
        """Jobs by kind and state, queue depth, writer lease, documents/chunks per index, dirty counts,
        reviews by state, webhook deliveries (``GET /metrics`` renders them with this process's meters)."""
        return metrics.snapshot(self.ctx)

    @tool
    def get_job_result(self, job_id: str) -> dict[str, Any]:
        """``{Success, job_id, kind, status, progress, result?, error?}``; an agent sees only its own jobs."""
        sc = self._scope()
        try:
            out = jobs.job_result(self.ctx, job_id)
        except GitkbError:
            if sc.scoped:  # unknown and foreign ids read the same
                scope.require_own_job(sc, {}, job_id)
            raise
        scope.require_own_job(sc, out, job_id)
        return out

    @tool
    def list_jobs(
        self,
        state: str | None = None,
        start: int | None = None,
        count: int | None = None,
    ) -> dict[str, Any]:
        """Newest first, paged (``start``/``count``)."""
        return jobs.list_jobs(self.ctx, state=state, start=start, count=count)

    @tool
    def cancel_job(self, job_id: str) -> dict[str, Any]:
        return jobs.cancel(self.ctx, job_id)

    @tool
    def wait_job(self, job_id: str, timeout: float | None = None, progress: Any = None) -> dict[str, Any]:
        """Block until the job finishes (or ``timeout``); returns get_job_result's dict."""
        jobs.job_result(self.ctx, job_id)  # not_found check
        jobs.wait(self.ctx, job_id, timeout=timeout, progress=progress)
        return jobs.job_result(self.ctx, job_id)

    @tool
    def reindex(
        self, force: bool = False, index_name: str | None = None, progress: Any = None
    ) -> dict[str, Any]:
        """Bring directory-fed indexes up to date with the disk (``force``: parse everything again)."""
        params = {"force": bool(force), "index_name": index_name}
        return jobs.run_inline(self.ctx, "reindex", params, progress=progress)

    # -- git sources, proposals, reviews, forges (services.changes.sources, .proposals, .review) --

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
        credential: str | None = None,
    ) -> dict[str, Any]:
        """Register a git repository feeding one or more indexes (created when missing); clones it.

        ``credential`` names a ``[[credentials]]`` entry of gitkb.toml (sent only to its hosts;
        ``forge={"credential": ...}`` for a different one on the forge API); ``auth`` with secret
        references is refused. ``webhook_secret`` verifies this source's forge webhooks (else
        ``GITKB_WEBHOOK_SECRET``)."""
        out = registry.add_source(
            self.ctx,
            name,
            url,
            branch=branch,
            documents_root=documents_root,
            index=index,
            include=include,
            exclude=exclude,
            forge=forge,
            auth=auth,
            credential=credential,
        )
        if webhook_secret:
            webhook_intake.set_webhook_secret(self.ctx, name, webhook_secret)
            out["webhook_secret"] = "set"
        return out

    @tool
    def source_list(self, start: int | None = None, count: int | None = None) -> dict[str, Any]:
        return registry.list_sources(self.ctx, start=start, count=count)

    @tool
    def source_sync(
        self, source: str, commit: str | None = None, full: bool = False, progress: Any = None
    ) -> dict[str, Any]:
        """Fetch and re-index only what changed since the last synced commit (a job of the writer)."""
        params = {"source": source, "commit": commit, "full": bool(full)}
        return jobs.run_inline(self.ctx, merges.SYNC_JOB_KIND, params, progress=progress)

    @tool
    def source_rollback(self, source: str, commit: str, progress: Any = None) -> dict[str, Any]:
        """Admin: move the source's indexes back to an older commit of its tracked branch (no sync does)."""
        params = {"source": source, "commit": commit}
        return jobs.run_inline(self.ctx, sync.ROLLBACK_JOB_KIND, params, progress=progress)

    @tool
    def source_remove(self, source: str, keep_documents: bool = False) -> dict[str, Any]:
        return registry.remove_source(self.ctx, source, keep_documents=keep_documents)

    @tool
    def checkout(self, source: str, directory: str) -> dict[str, Any]:
        """Admin: a read-only working copy of ``source`` at its synced commit in ``directory``."""
        return checkouts.checkout(self.ctx, source, directory)

    @tool
    def propose_kb_edit(
        self,
        source_id_or_index: str,
        relative_path: str,
        content: str = "",
        search: str = "",
        replace: str = "",
        note: str = "",
    ) -> dict[str, Any]:
        """Stage an edit (whole content, or exact-once search/replace) on the source's proposal branch."""
        scope.require_source(self.ctx, self._scope(), source_id_or_index)

        return proposals.propose_kb_edit(
            self.ctx,
            source_id_or_index,
            relative_path,
            content,
            search,
            replace,
            note,
        )

    @tool
    def propose_kb_delete(
        self, source_id_or_index: str, relative_path: str, note: str = ""
    ) -> dict[str, Any]:
        scope.require_source(self.ctx, self._scope(), source_id_or_index)

        return proposals.propose_kb_delete(self.ctx, source_id_or_index, relative_path, note)

    @tool
    def propose_kb_rename(
        self, source_id_or_index: str, relative_path: str, new_relative_path: str, note: str = ""
    ) -> dict[str, Any]:
        scope.require_source(self.ctx, self._scope(), source_id_or_index)

        return proposals.propose_kb_rename(
            self.ctx,
            source_id_or_index,
            relative_path,
            new_relative_path,
            note,
        )

    @tool
    def list_proposals(
        self,
        source: str | None = None,
        state: str = "staged",
        start: int | None = None,
        count: int | None = None,
    ) -> dict[str, Any]:
        return proposals.list_proposals(self.ctx, source, state, start=start, count=count)

    @tool
    def show_proposal(self, proposal_id: str) -> dict[str, Any]:
        return proposals.show_proposal(self.ctx, proposal_id)

    @tool
    def discard_proposal(self, proposal_id: str) -> dict[str, Any]:
        return proposals.discard_proposal(self.ctx, proposal_id)

    @tool
    def refresh_proposals(self, source: str) -> dict[str, Any]:
        """Make every staged proposal again on the target branch's head now: per proposal applied or conflict."""
        scope.require_source(self.ctx, self._scope(), source)

        return proposals.refresh_proposals(self.ctx, source, actor=self.principal.label)

    @tool
    def cite_check(self, chunk_id: str) -> dict[str, Any]:
        """Is the cited text still at the cited commit and lines, and still current at the branch head?"""
        out = cite_check(self.ctx, chunk_id)
        sc = self._scope()
        if sc.scoped and not sc.can_read(str(out.get("index_id"))):
            raise NotFound(f"no citation {chunk_id!r} in the indexes of agent {sc.agent_id!r}")
        return out

    @tool
    def open_kb_pull_request(
        self,
        source_id_or_index: str,
        target_index: str = "",
        title: str = "",
        body: str = "",
        commit_message: str = "",
        requested_by: str | None = None,
        proposal_ids: list[str] | None = None,
    ) -> dict[str, Any]:
        """Ask for review of the staged proposals: returns review_id, review_state 'pending', changed_files.

        ``requested_by``: ``agent:<id>``, ``token:<name>`` or ``local:<user>`` (None: ``local:<your user>``)."""
        sc = self._scope()
        scope.require_source(self.ctx, sc, source_id_or_index)
        if target_index:
            scope.require_index(self.ctx, sc, target_index, write=False)

        return review.open_kb_pull_request(
            self.ctx,
            source_id_or_index,
            target_index,
            title,
            body,
            commit_message,
            requested_by=requested_by if self.principal.is_local else self.principal.label,
            proposal_ids=proposal_ids,
        )

    @tool
    def list_reviews(
        self,
        state: str | None = None,
        source: str | None = None,
        start: int | None = None,
        count: int | None = None,
    ) -> dict[str, Any]:
        """Reviews, pending first (``Reviews``), paged."""
        return review.list_reviews(self.ctx, state, source, start=start, count=count)

    @tool
    def show_review(self, review_id: str) -> dict[str, Any]:
        return review.show_review(self.ctx, review_id)

    @tool
    def approve_review(
        self, review_id: str, reviewer: str = "operator", overwrite: bool = False
    ) -> dict[str, Any]:
        """Push the staged branch with a lease and open/update the PR/MR: number, url, changed_files.

        ``overwrite=True`` acknowledges the review's ``overwrites`` (commits gitkb did not push that the
        push replaces); without it such an approval is refused and nothing is pushed."""
        return review.approve_review(
            self.ctx, review_id, reviewer=self._reviewer(reviewer), overwrite=overwrite
        )

    @tool
    def deny_review(self, review_id: str, reason: str, reviewer: str = "operator") -> dict[str, Any]:
        return review.deny_review(self.ctx, review_id, reason, reviewer=self._reviewer(reviewer))

    @tool
    def forge_merge(self, source: str, number: int, wait: bool = True) -> dict[str, Any]:
        """Local forge: merge change request NUMBER into its base, then sync (like a webhook would)."""
        return merges.forge_merge(self.ctx, source, number, wait=wait)

    @tool
    def forge_close(self, source: str, number: int) -> dict[str, Any]:
        """Local forge: close change request NUMBER unmerged (its reviews become 'closed')."""
        return merges.forge_close(self.ctx, source, number)

    @tool
    def list_pull_requests(self, source: str, state: str | None = None) -> dict[str, Any]:
        return merges.list_pull_requests(self.ctx, source, state)

    @tool
    def list_audit(
        self,
        target: str | None = None,
        start: int | None = None,
        count: int | None = None,
    ) -> dict[str, Any]:
        """The audit log, newest first: who, when, what, result (paged)."""
        return audit.list_audit(self.ctx, target=target, start=start, count=count)

    # -- knowledge bases, agents, agent-scoped calls (services.access.knowledge, services.dispatch.scope) --

    @tool
    def kb_create(self, name: str, indexes: list[str]) -> dict[str, Any]:
        """A knowledge base over these indexes (names or kidx_ ids); it stores the ids."""
        return knowledge.kb_create(self.ctx, name, indexes)

    @tool
    def kb_list(self) -> dict[str, Any]:
        return knowledge.kb_list(self.ctx)

    @tool
    def kb_delete(self, name: str, force: bool = False) -> dict[str, Any]:
        """Refused while agents use it, unless ``force`` (which unassigns it from them)."""
        return knowledge.kb_delete(self.ctx, name, force=force)

    @tool
    def agent_assign(
        self,
        agent_id: str,
        kbs: list[str],
        mode: str | None = None,
        read_only: bool = False,
        default_top_n: int | None = None,
    ) -> dict[str, Any]:
        """Bind an agent to knowledge bases in a mode: ``read``, ``propose`` (default) or ``write``
        (``read_only=True`` is the older spelling of mode ``read``)."""
        return knowledge.agent_assign(
            self.ctx, agent_id, kbs, mode=mode, read_only=read_only, default_top_n=default_top_n
        )

    @tool
    def agent_unassign(self, agent_id: str, kbs: list[str]) -> dict[str, Any]:
        return knowledge.agent_unassign(self.ctx, agent_id, kbs)

    @tool
    def agent_show(self, agent_id: str) -> dict[str, Any]:
        return knowledge.agent_show(self.ctx, agent_id)

    @tool
    def agent_usage(self, agent_id: str) -> dict[str, Any]:
        """Query-embedding events of an agent: count, tokens, duration."""
        return knowledge.agent_usage(self.ctx, agent_id)

    def _agent_ref(self, agent_id: str | None) -> str | None:
        """The agent a scoped read speaks for: an agent principal only ever for itself."""
        if not self.principal.is_agent:
            return agent_id
        if agent_id not in (None, self.principal.agent_id):
            raise Forbidden(f"agent {self.principal.agent_id!r} can only act for itself")
        return self.principal.agent_id

    @tool
    def list_knowledge_bases(self, agent_id: str | None = None) -> dict[str, Any]:
        """Every knowledge base, or only an agent's (with its mode per binding)."""
        return knowledge.list_knowledge_bases(self.ctx, self._agent_ref(agent_id))

    @tool
    def search_index(
        self,
        query: str,
        indexes: list[str] | None = None,
        top_n: int | None = None,
        *,
        tenant: str | None = None,
        tiers: list[str] | None = None,
        mode: str | None = None,
        agent_id: str | None = None,
    ) -> dict[str, Any]:
        """Search with citations, limited to the agent's indexes (the agent principal's, or
        ``agent_id`` when the operator asks as that agent)."""
        sc = scope.load_scope(self.ctx, self._agent_ref(agent_id))
        return scoped_search.search_index(
            self.ctx, sc, query, indexes=indexes, top_n=top_n, tenant=tenant, tiers=tiers, mode=mode
        )

    @tool
    def purge_expired(self) -> dict[str, Any]:
        """Delete documents past their TTL (a job of the writer)."""
        return jobs.run_inline(self.ctx, "purge_expired", {})

    # -- embeddings ------------------------------------------------------------

    def _resume_embeddings(self) -> bool:
        """Vectors that lag behind the change log (a crash, another process) catch up in the background."""
        try:
            return embeddings.resume_if_pending(self.ctx)
        except Exception as exc:  # noqa: BLE001 - opening a workspace never fails on the derived vectors
            log.warning("could not resume background embedding: %s", exc)
            return False

    @tool
    def build_embeddings(self, force: bool = False, progress: Any = None) -> dict[str, Any]:
        """Block until every chunk has its vector (``force``: re-embed everything); returns ``chunks_embedded``."""
        return jobs.run_inline(self.ctx, "build_embeddings", {"force": bool(force)}, progress=progress)

    @tool
    def wait_for_vectors(self, vectors_range: list[int], progress: Any = None) -> dict[str, Any]:
        """Block until the chunks a write reported (its ``vectors_range``) have their vectors; returns
        ``vectors: ready`` with how many were embedded and reused, whoever did the work."""
        after, upto = _seq_range(vectors_range)
        return vector_wait.wait_for_range(self.ctx, after, upto, progress=progress)

    @tool
    def embeddings_status(self) -> dict[str, Any]:
        """available, provider, model, identity, fingerprint, chunk_count, pending, collections, path."""
        return scope.filter_embeddings_status(self.ctx, self._scope(), embeddings.embeddings_status(self.ctx))

    @tool
    def verify(self, index_name: str | None = None, repair: bool = False) -> dict[str, Any]:
        """Compare the catalog with the keyword index, the vectors, the clones and the watermarks;
        ``repair`` fixes what the derived stores can. ``clean``: nothing differs (after the repair)."""
        if repair:  # it writes the keyword index and the vectors: the writer runs it, as a job
            return jobs.run_inline(self.ctx, "verify_repair", {"index_name": index_name})
        from gitkb.services.operations import (
            verify,  # loads pygit2 and the source registry: only when it runs
        )

        return verify.verify(self.ctx, index_name=index_name)

    @tool
    def reembed(self, index_name: str | None = None, progress: Any = None) -> dict[str, Any]:
        """Re-embed an index (default: every index stranded by a model change) into its active identity."""
        return jobs.run_inline(self.ctx, "reembed", {"index_name": index_name}, progress=progress)

    @tool
    def set_embedding_identity(self, provider: str, model: str | None = None) -> dict[str, Any]:
        """Change the workspace's active embedding identity (indexes with vectors elsewhere need a re-embed)."""
        return identity.set_active_identity(self.ctx, provider, model)

    backup, restore = tool(workspace_backup.backup), tool(workspace_backup.restore)  # workspace_backup.py
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
        return evaluation.eval_beir(
            self.ctx,
            path,
            split=split,
            mode=mode,
            index_name=index_name,
            chunk_strategy=chunk_strategy,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            progress=progress,
        )

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
        return evaluation.eval_qa(
            self.ctx, path, mode=mode, index_name=index_name, ask=ask, progress=progress
        )
