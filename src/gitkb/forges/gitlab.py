"""The GitLab forge, through python-gitlab.

Requests (GitLab REST v4, all with ``PRIVATE-TOKEN``):

- ``GET /projects/:id`` once, cached (``:id`` is the URL-encoded path);
- ``GET /projects/:id/merge_requests?source_branch=...&state=opened`` (all pages);
- ``POST /projects/:id/merge_requests``;
- ``GET`` / ``PUT /projects/:id/merge_requests/:iid``;
- ``GET /projects/:id/merge_requests/:iid/diffs`` (all pages; GitLab 15.7+),
  falling back to the older ``.../changes`` when ``diffs`` is not there.

A 429 is reported at once as a ``rate_limit`` error with its reset time
(python-gitlab would otherwise sleep and retry inside the call); the caller
(a job) decides when to retry.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import gitlab
import requests
from gitlab import exceptions as gl_exc

from gitkb.core.errors import ForgeError, InvalidArgument

from .base import ChangeRequest, ForgeConfig, changed_file
from .failures import (
    ALREADY_EXISTS,
    CONNECTION,
    NOT_FOUND,
    PROTOCOL,
    connection_reason,
    describe,
    forge_error,
    is_rate_limited,
    kind_for_status,
    rate_limit_error,
)

DEFAULT_URL = "https://gitlab.com"
_CALL: dict[str, Any] = {"obey_rate_limit": False}
STATES = {"opened": "open", "reopened": "open", "locked": "open", "closed": "closed", "merged": "merged"}

T = TypeVar("T")


class GitLabForge:
    """Merge requests on one GitLab project."""

    name = "gitlab"

    def __init__(self, config: ForgeConfig, *, session: requests.Session | None = None) -> None:
        if config.token is None:
            raise InvalidArgument(
                "the GitLab forge needs an access token",
                next_steps=["set token_env (or a secrets file key) in the forge config"],
            )
        project = config.repo.strip("/")
        if not project:
            raise InvalidArgument("GitLab project path is empty")
        url = (config.api_url or DEFAULT_URL).rstrip("/")
        if url.endswith("/api/v4"):
            url = url[: -len("/api/v4")]
        self._config = config
        self.project_path = project
        self.url = url
        self._last = threading.local()
        self._session = session or requests.Session()
        self._session.hooks["response"].append(self._remember)
        self._gl = gitlab.Gitlab(
            url,
            private_token=config.token.reveal(),
            timeout=config.timeout,
            retry_transient_errors=False,
            keep_base_url=True,
            session=self._session,
        )
        self._project: Any = None

    # -- the Forge protocol -------------------------------------------------

    def find_open_by_head(self, head: str) -> ChangeRequest | None:
        def run() -> ChangeRequest | None:
            project = self._proj()
            mrs = project.mergerequests.list(source_branch=head, state="opened", get_all=True, **_CALL)
            for mr in mrs:
                same_project = getattr(mr, "source_project_id", project.id) == project.id
                if mr.source_branch == head and same_project:
                    return _change_request(mr)
            return None

        return self._call(f"list open merge requests for {head!r}", run)

    def create(self, *, head: str, base: str, title: str, body: str) -> ChangeRequest:
        def run() -> ChangeRequest:
            data = {"source_branch": head, "target_branch": base, "title": title, "description": body}
            return _change_request(self._proj().mergerequests.create(data, **_CALL))

        return self._call(f"create a merge request {head!r} -> {base!r}", run)

    def update(self, number: int, *, title: str, body: str) -> ChangeRequest:
        def run() -> ChangeRequest:
            mr = self._proj().mergerequests.get(int(number), lazy=True)
            mr.title = title
            mr.description = body
            mr.save(**_CALL)
            return _change_request(mr)

        return self._call(f"update merge request !{number}", run)

    def get(self, number: int) -> ChangeRequest:
        return self._call(
            f"get merge request !{number}",
            lambda: _change_request(self._proj().mergerequests.get(int(number), **_CALL)),
        )

    def changed_files(self, number: int) -> list[dict[str, str]]:
        def run() -> list[dict[str, str]]:
            path = f"/projects/{self._proj().encoded_id}/merge_requests/{int(number)}"
            try:
                diffs = self._gl.http_list(f"{path}/diffs", get_all=True, **_CALL)
            except gl_exc.GitlabHttpError as exc:
                if exc.response_code != 404:
                    raise
                changes = self._gl.http_get(f"{path}/changes", **_CALL)  # GitLab before 15.7
                diffs = changes.get("changes", []) if isinstance(changes, dict) else []
            return [_file(d) for d in diffs]

        return self._call(f"list files of merge request !{number}", run)

    # -- plumbing -----------------------------------------------------------

    def _proj(self) -> Any:
        if self._project is None:
            self._project = self._gl.projects.get(self.project_path, **_CALL)
        return self._project

    def _remember(self, response: requests.Response, *args: Any, **kwargs: Any) -> requests.Response:
        self._last.headers = dict(response.headers)
        return response

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        self._last.headers = {}
        try:
            return fn()
        except ForgeError:
            raise
        except gl_exc.GitlabError as exc:
            if exc.response_code is None:
                raise forge_error(
                    self.name,
                    PROTOCOL,
                    f"GitLab: {what} failed: {exc.error_message}",
                    secrets=self._config.secrets(),
                ) from None
            raise self._from_response(what, exc) from None
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise forge_error(
                self.name,
                CONNECTION,
                f"GitLab: {what} failed: cannot reach {self.url}: {connection_reason(exc)}",
                secrets=self._config.secrets(),
                api_url=self.url,
            ) from None
        except requests.RequestException as exc:
            raise forge_error(
                self.name,
                PROTOCOL,
                f"GitLab: {what} failed: {type(exc).__name__}",
                secrets=self._config.secrets(),
            ) from None

    def _from_response(self, what: str, exc: gl_exc.GitlabError) -> ForgeError:
        status = int(exc.response_code or 0)
        headers: dict[str, str] = getattr(self._last, "headers", {}) or {}
        message = _message(exc.error_message)
        if is_rate_limited(status, headers, message):
            return rate_limit_error("gitlab", status, headers, message, secrets=self._config.secrets())
        kind = kind_for_status(status)
        if status == 409 and "already exists" in message.lower():
            kind = ALREADY_EXISTS
        if status == 404 and self._project is None:
            message = f"project {self.project_path!r}: {message}"
            kind = NOT_FOUND
        return forge_error(
            self.name,
            kind,
            f"GitLab: {what} failed ({status}, {describe(kind)}): {message}",
            secrets=self._config.secrets(),
            status=status,
            forge_message=message,
        )


def _message(raw: Any) -> str:
    """GitLab's ``message`` is a string, a list, or a field -> [errors] map."""
    if isinstance(raw, bytes):
        return raw.decode("utf-8", "replace")
    if isinstance(raw, list):
        return "; ".join(str(m) for m in raw)
    if isinstance(raw, dict):
        return "; ".join(
            f"{k} {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in raw.items()
        )
    return str(raw)


def _file(diff: dict[str, Any]) -> dict[str, str]:
    if diff.get("new_file"):
        return changed_file(diff["new_path"], "A")
    if diff.get("deleted_file"):
        return changed_file(diff["old_path"], "D")
    if diff.get("renamed_file"):
        return changed_file(diff["new_path"], "R", diff.get("old_path"))
    return changed_file(diff["new_path"], "M")


def _change_request(mr: Any) -> ChangeRequest:
    raw_state = str(getattr(mr, "state", "opened"))
    state = STATES.get(raw_state, "closed")
    merged = state == "merged"
    sha = (
        (getattr(mr, "merge_commit_sha", None) or getattr(mr, "squash_commit_sha", None)) if merged else None
    )
    return ChangeRequest(
        number=int(mr.iid),
        url=str(mr.web_url),
        state=state,  # type: ignore[arg-type]
        head=str(mr.source_branch),
        base=str(mr.target_branch),
        title=str(mr.title),
        merged=merged,
        merge_commit_sha=sha,
    )


def create(config: ForgeConfig) -> GitLabForge:
    """The registry factory."""
    return GitLabForge(config)
