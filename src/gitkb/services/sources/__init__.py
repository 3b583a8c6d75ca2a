"""Git sources: registry, sidecars, sync, citations, and merge-driven sync requests.

Public API::

    add_source, list_sources, remove_source, resolve_source   # registry
    sync_source, sync_job                                     # sync (a plain job function)
    rollback_job, check_target                                # the admin's move back; a dry check
    request_sync                                              # deduplicated per (source, commit)
    forge_merge, forge_close, list_pull_requests              # the local forge's buttons
    change_request_closed                                     # a CR closed unmerged
    cite_check                                                # is a citation still true?
"""

from __future__ import annotations

from gitkb.services.sources.merges import (
    SYNC_JOB_KIND,
    change_request_closed,
    forge_close,
    forge_merge,
    list_pull_requests,
    request_sync,
)
from gitkb.services.sources.registry import add_source, list_sources, remove_source, resolve_source
from gitkb.services.sources.sync import ROLLBACK_JOB_KIND, check_target, rollback_job, sync_job, sync_source

__all__ = [
    "ROLLBACK_JOB_KIND",
    "SYNC_JOB_KIND",
    "add_source",
    "change_request_closed",
    "check_target",
    "forge_close",
    "forge_merge",
    "list_pull_requests",
    "request_sync",
    "list_sources",
    "remove_source",
    "resolve_source",
    "rollback_job",
    "sync_job",
    "sync_source",
]
