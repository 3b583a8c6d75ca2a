"""The job kinds a process can run: ``JobKind`` (a plain function ``fn(ctx, params, progress) -> dict``,
whether it is safe to run again, which parameters are staged out of the job row, a check before a job
row exists) and the registry ``load_kinds`` fills from one list
(``gitkb.services.dispatch.job_kinds.JOB_KINDS``). ``services.runtime.jobs`` runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gitkb.core import errors
from gitkb.services.context import Context

Progress = Callable[..., None]  # progress(done, total, note=None)
JobFn = Callable[[Context, dict[str, Any], Progress], dict[str, Any]]


Check = Callable[[Context, dict[str, Any]], None]


@dataclass(frozen=True)
class JobKind:
    fn: JobFn
    resumable: bool = True  # safe to run again after a crash mid-way
    staged: tuple[str, ...] = ()  # dotted params keys kept out of jobs.params (see stores.catalog.jobs)
    check: Check | None = None  # raises before a job row exists: a refused call leaves no failed job


_KINDS: dict[str, JobKind] = {}  # what load_kinds was given (gitkb.services.dispatch.job_kinds.JOB_KINDS)


def load_kinds(kinds: Mapping[str, JobKind]) -> None:
    """Make these job kinds runnable; the composition root (``Workspace``) calls it once with
    ``gitkb.services.dispatch.job_kinds.JOB_KINDS``. Loading the same kinds again changes nothing."""
    _KINDS.update(kinds)


def add_kind(name: str, kind: JobKind) -> None:
    """One more job kind of the operator's own (tests use it for slow kinds); ``remove_kind`` drops it."""
    _KINDS[name] = kind


def remove_kind(name: str) -> None:
    _KINDS.pop(name, None)


def kind_of(name: str) -> JobKind | None:
    """The loaded job kind called ``name``, or None."""
    return _KINDS.get(name)


def split_staged(kind: str, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """``params`` without the kind's staged string values, and those values by dotted key."""
    spec = kind_of(kind)
    if spec is None or not spec.staged:
        return params, {}
    kept = dict(params)
    staged: dict[str, str] = {}
    for key in spec.staged:
        *parents, leaf = key.split(".")
        holder: Any = kept
        for part in parents:
            inner = holder.get(part) if isinstance(holder, dict) else None
            if not isinstance(inner, dict):
                holder = None
                break
            copied = dict(inner)  # copy on the way down: the caller's dict stays whole
            holder[part] = copied
            holder = copied
        if isinstance(holder, dict) and isinstance(holder.get(leaf), str):
            staged[key] = holder.pop(leaf)
    return kept, staged


def preflight(ctx: Context, kind: str, params: dict[str, Any]) -> None:
    """Refuse a job its kind's check refuses, before anything is recorded."""
    spec = kind_of(kind)
    if spec is None:
        raise errors.InvalidArgument(f"unknown job kind {kind!r}")
    if spec.check is not None:
        spec.check(ctx, params)
