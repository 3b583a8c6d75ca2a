"""A stateful GitLab REST v4 mock in GitLab's documented shapes.

GitLab publishes no machine-readable description of the merge request API, so
``ENDPOINTS`` below restates, from GitLab's API docs (doc/api/projects.md
"Get a single project", doc/api/merge_requests.md "List project merge
requests", "Create MR", "Update MR", "Get single MR", "List merge request
diffs", "Get single merge request changes"), which query parameters and body
attributes each endpoint takes and which body attributes are required. A
request outside it is recorded in ``failures`` (the fixture fails the test)
and answered 400. Answers carry the documented attributes, ``X-Total`` /
``X-Next-Page`` / ``Link`` pagination headers, and GitLab's error bodies:
``{"message": "401 Unauthorized"}``, ``{"message": "404 Project Not Found"}``,
``{"message": ["Another open merge request already exists for this source
branch: !1"]}`` (409), ``{"error": "title is missing"}`` (400).
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlencode

from .http import MockHTTPServer, Request, Response

_PAGING = {"page": int, "per_page": int}
_STATE = ("opened", "closed", "locked", "merged", "all")


@dataclass(frozen=True)
class Endpoint:
    name: str
    method: str
    pattern: re.Pattern[str]
    query: dict[str, Any]  # name -> int | str | bool | tuple of allowed values
    body: dict[str, Any] = field(default_factory=dict)
    required: tuple[str, ...] = ()


def _ep(
    name: str,
    method: str,
    path: str,
    query: dict[str, Any],
    body: dict[str, Any] | None = None,
    required: tuple[str, ...] = (),
) -> Endpoint:
    regex = "^/api/v4" + re.sub(r":(\w+)", r"(?P<\1>[^/]+)", path) + "$"
    return Endpoint(name, method, re.compile(regex), query, body or {}, required)


_MR_LIST_QUERY: dict[str, Any] = {
    **_PAGING,
    "state": _STATE,
    "source_branch": str,
    "target_branch": str,
    "order_by": str,
    "sort": ("asc", "desc"),
    "milestone": str,
    "view": ("simple",),
    "labels": str,
    "with_labels_details": bool,
    "with_merge_status_recheck": bool,
    "created_after": str,
    "created_before": str,
    "updated_after": str,
    "updated_before": str,
    "scope": str,
    "author_id": int,
    "author_username": str,
    "assignee_id": int,
    "reviewer_id": int,
    "reviewer_username": str,
    "my_reaction_emoji": str,
    "search": str,
    "in": str,
    "wip": str,
    "draft": bool,
    "iids[]": int,
    "source_project_id": int,
    "environment": str,
}
_MR_CREATE: dict[str, Any] = {
    "source_branch": str,
    "target_branch": str,
    "title": str,
    "description": str,
    "assignee_id": int,
    "assignee_ids": list,
    "reviewer_ids": list,
    "labels": str,
    "milestone_id": int,
    "remove_source_branch": bool,
    "allow_collaboration": bool,
    "allow_maintainer_to_push": bool,
    "squash": bool,
    "target_project_id": int,
    "approvals_before_merge": int,
    "merge_after": str,
}
_MR_UPDATE: dict[str, Any] = {
    "title": str,
    "description": str,
    "target_branch": str,
    "state_event": ("close", "reopen"),
    "assignee_id": int,
    "assignee_ids": list,
    "reviewer_ids": list,
    "labels": str,
    "add_labels": str,
    "remove_labels": str,
    "milestone_id": int,
    "remove_source_branch": bool,
    "squash": bool,
    "discussion_locked": bool,
    "allow_collaboration": bool,
    "allow_maintainer_to_push": bool,
    "merge_after": str,
}

ENDPOINTS = (
    _ep(
        "project",
        "GET",
        "/projects/:id",
        {"statistics": bool, "license": bool, "with_custom_attributes": bool},
    ),
    _ep("mr_list", "GET", "/projects/:id/merge_requests", _MR_LIST_QUERY),
    _ep(
        "mr_create",
        "POST",
        "/projects/:id/merge_requests",
        {},
        _MR_CREATE,
        ("source_branch", "target_branch", "title"),
    ),
    _ep(
        "mr_get",
        "GET",
        "/projects/:id/merge_requests/:iid",
        {"render_html": bool, "include_diverged_commits_count": bool, "include_rebase_in_progress": bool},
    ),
    _ep("mr_update", "PUT", "/projects/:id/merge_requests/:iid", {}, _MR_UPDATE),
    _ep("mr_diffs", "GET", "/projects/:id/merge_requests/:iid/diffs", {**_PAGING, "unidiff": bool}),
    _ep(
        "mr_changes",
        "GET",
        "/projects/:id/merge_requests/:iid/changes",
        {"access_raw_diffs": bool, "unidiff": bool},
    ),
)


class Invalid(Exception):
    pass


def _check_value(name: str, value: Any, kind: Any, *, from_query: bool) -> None:
    if isinstance(kind, tuple):
        if value not in kind:
            raise Invalid(f"{name}={value!r} is not one of {kind}")
    elif kind is int:
        ok = (
            bool(re.fullmatch(r"\d+", value))
            if from_query
            else isinstance(value, int) and not isinstance(value, bool)
        )
        if not ok:
            raise Invalid(f"{name}={value!r} is not an integer")
    elif kind is bool:
        ok = value in ("true", "false") if from_query else isinstance(value, bool)
        if not ok:
            raise Invalid(f"{name}={value!r} is not a boolean")
    elif not isinstance(value, kind):
        raise Invalid(f"{name}={value!r} is not a {kind.__name__}")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


@dataclass
class MR:
    iid: int
    title: str
    description: str
    source_branch: str
    target_branch: str
    state: str = "opened"
    merge_commit_sha: str | None = None
    source_project_id: int = 0
    created_at: str = field(default_factory=_now)
    updated_at: str = field(default_factory=_now)


@dataclass
class Seen:
    endpoint: str
    method: str
    path: str
    query: dict[str, str]
    body: Any


class GitLabMock:
    def __init__(
        self, *, project: str = "docs-group/handbook", project_id: int = 7, token: str = "glpat-" + "Q" * 20
    ) -> None:
        self.project_path, self.project_id, self.token = project, project_id, token
        self.branches: dict[str, list[dict[str, Any]]] = {"main": []}
        self.mrs: dict[int, MR] = {}
        self.failures: list[str] = []
        self.seen: list[Seen] = []
        self.has_diffs_endpoint = True  # False: a GitLab before 15.7
        self._forced: list[tuple[str | None, Response]] = []
        self._lock = threading.Lock()
        self._server = MockHTTPServer(self.handle)

    # -- controls -------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return self._server.base_url

    def start(self) -> GitLabMock:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def push_branch(self, name: str, diffs: list[dict[str, Any]]) -> None:
        """Diffs as GitLab lists them: ``{old_path, new_path, new_file, renamed_file, deleted_file}``."""
        self.branches[name] = diffs

    def force(
        self, status: int, body: Any, *, endpoint: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        self._forced.append((endpoint, Response(status, body, dict(headers or {}))))

    def endpoints(self) -> list[str]:
        return [s.endpoint for s in self.seen]

    # -- dispatch ---------------------------------------------------------------------

    def handle(self, req: Request) -> Response:
        with self._lock:
            try:
                ep, params, query, body = self._validate(req)
            except Invalid as exc:
                self.failures.append(f"{req.method} {req.path}: {exc}")
                return Response(400, {"error": f"mock: not a documented request: {exc}"})
            self.seen.append(Seen(ep.name, req.method, req.path, query, body))
            if req.headers.get("private-token") != self.token:
                return Response(401, {"message": "401 Unauthorized"})
            for i, (name, resp) in enumerate(self._forced):
                if name in (None, ep.name):
                    del self._forced[i]
                    return resp
            pid = unquote(params["id"])
            if pid not in (str(self.project_id), self.project_path):
                return Response(404, {"message": "404 Project Not Found"})
            answer: Response = getattr(self, f"_{ep.name}")(params, query, body, req)
            return answer

    def _validate(self, req: Request) -> tuple[Endpoint, dict[str, str], dict[str, str], Any]:
        candidates = [(ep, m) for ep in ENDPOINTS if (m := ep.pattern.match(req.path))]
        if not candidates:
            raise Invalid("no documented endpoint has this path")
        matching = [(ep, m) for ep, m in candidates if ep.method == req.method]
        if not matching:
            raise Invalid(f"{req.method} is not documented for this path")
        ep, m = matching[0]
        query: dict[str, str] = {}
        for name, values in req.query.items():
            if name not in ep.query:
                raise Invalid(f"{ep.name}: undocumented query parameter {name!r}")
            if len(values) != 1:
                raise Invalid(f"{ep.name}: query parameter {name!r} given {len(values)} times")
            _check_value(name, values[0], ep.query[name], from_query=True)
            query[name] = values[0]
        body = None
        if req.body:
            if not ep.body:
                raise Invalid(f"{ep.name}: takes no body")
            if not req.headers.get("content-type", "").startswith("application/json"):
                raise Invalid(f"{ep.name}: body is not application/json")
            body = req.json()
            if not isinstance(body, dict):
                raise Invalid(f"{ep.name}: body is not an object")
            for name, value in body.items():
                if name not in ep.body:
                    raise Invalid(f"{ep.name}: undocumented attribute {name!r}")
                _check_value(name, value, ep.body[name], from_query=False)
        elif ep.method in ("POST", "PUT"):
            raise Invalid(f"{ep.name}: body missing")
        if ep.name == "mr_update" and not body:
            raise Invalid("mr_update: at least one attribute is required")
        return ep, m.groupdict(), query, body

    # -- endpoints -------------------------------------------------------------------

    def _project(self, params: dict[str, str], query: dict[str, str], body: Any, req: Request) -> Response:
        return Response(200, self._project_json())

    def _mr_list(self, params: dict[str, str], query: dict[str, str], body: Any, req: Request) -> Response:
        state = query.get("state", "all")
        out = [
            self._mr_json(mr)
            for mr in sorted(
                self.mrs.values(), key=lambda m: m.iid, reverse=query.get("sort", "desc") == "desc"
            )
            if (state == "all" or mr.state == state)
            and query.get("source_branch") in (None, mr.source_branch)
            and query.get("target_branch") in (None, mr.target_branch)
        ]
        return self._page(out, query, req)

    def _mr_create(
        self, params: dict[str, str], query: dict[str, str], body: dict[str, Any], req: Request
    ) -> Response:
        missing = [a for a in ("source_branch", "target_branch", "title") if a not in body]
        if missing:
            return Response(400, {"error": f"{missing[0]} is missing"})
        src, dst = body["source_branch"], body["target_branch"]
        if src == dst:
            return Response(422, {"message": ["You can't use same project/branch for source and target"]})
        for name, branch in (("Source", src), ("Target", dst)):
            if branch not in self.branches:
                return Response(422, {"message": [f'{name} branch "{branch}" does not exist']})
        if not body["title"].strip():
            return Response(400, {"message": {"title": ["can't be blank"]}})
        for mr in self.mrs.values():
            if mr.state == "opened" and mr.source_branch == src and mr.target_branch == dst:
                msg = f"Another open merge request already exists for this source branch: !{mr.iid}"
                return Response(409, {"message": [msg]})
        iid = max(self.mrs, default=0) + 1
        mr = MR(iid, body["title"], body.get("description", ""), src, dst, source_project_id=self.project_id)
        self.mrs[iid] = mr
        return Response(201, self._mr_json(mr))

    def _mr_get(self, params: dict[str, str], query: dict[str, str], body: Any, req: Request) -> Response:
        mr = self.mrs.get(int(params["iid"]))
        return (
            Response(200, self._mr_json(mr, full=True)) if mr else Response(404, {"message": "404 Not found"})
        )

    def _mr_update(
        self, params: dict[str, str], query: dict[str, str], body: dict[str, Any], req: Request
    ) -> Response:
        mr = self.mrs.get(int(params["iid"]))
        if mr is None:
            return Response(404, {"message": "404 Not found"})
        for key in ("title", "description", "target_branch"):
            if key in body:
                setattr(mr, key, body[key])
        if body.get("state_event") == "close":
            mr.state = "closed"
        mr.updated_at = _now()
        return Response(200, self._mr_json(mr, full=True))

    def _mr_diffs(self, params: dict[str, str], query: dict[str, str], body: Any, req: Request) -> Response:
        if not self.has_diffs_endpoint:
            return Response(404, {"error": "404 Not Found"})
        mr = self.mrs.get(int(params["iid"]))
        if mr is None:
            return Response(404, {"message": "404 Not found"})
        return self._page([self._diff_json(d) for d in self.branches.get(mr.source_branch, [])], query, req)

    def _mr_changes(self, params: dict[str, str], query: dict[str, str], body: Any, req: Request) -> Response:
        mr = self.mrs.get(int(params["iid"]))
        if mr is None:
            return Response(404, {"message": "404 Not found"})
        data = self._mr_json(mr, full=True)
        data["changes"] = [self._diff_json(d) for d in self.branches.get(mr.source_branch, [])]
        data["overflow"] = False
        return Response(200, data)

    # -- shapes ------------------------------------------------------------------------

    def _project_json(self) -> dict[str, Any]:
        ns, _, name = self.project_path.rpartition("/")
        web = f"{self.base_url}/{self.project_path}"
        api = f"{self.base_url}/api/v4/projects/{self.project_id}"
        return {
            "id": self.project_id,
            "description": "Team handbook",
            "name": name,
            "name_with_namespace": f"{ns} / {name}",
            "path": name,
            "path_with_namespace": self.project_path,
            "created_at": "2024-01-10T09:00:00.000Z",
            "default_branch": "main",
            "tag_list": [],
            "topics": [],
            "ssh_url_to_repo": f"git@127.0.0.1:{self.project_path}.git",
            "http_url_to_repo": f"{web}.git",
            "web_url": web,
            "readme_url": f"{web}/-/blob/main/README.md",
            "avatar_url": None,
            "forks_count": 0,
            "star_count": 0,
            "last_activity_at": "2024-06-01T12:00:00.000Z",
            "namespace": {
                "id": 3,
                "name": ns,
                "path": ns,
                "kind": "group",
                "full_path": ns,
                "parent_id": None,
                "avatar_url": None,
                "web_url": f"{self.base_url}/groups/{ns}",
            },
            "_links": {
                "self": api,
                "issues": f"{api}/issues",
                "merge_requests": f"{api}/merge_requests",
                "repo_branches": f"{api}/repository/branches",
                "labels": f"{api}/labels",
                "events": f"{api}/events",
                "members": f"{api}/members",
            },
            "empty_repo": False,
            "archived": False,
            "visibility": "private",
            "merge_requests_enabled": True,
            "merge_method": "merge",
        }

    def _mr_json(self, mr: MR, *, full: bool = False) -> dict[str, Any]:
        user = {
            "id": 1,
            "username": "gitkb-bot",
            "name": "gitkb",
            "state": "active",
            "locked": False,
            "avatar_url": None,
            "web_url": f"{self.base_url}/gitkb-bot",
        }
        merged = mr.state == "merged"
        data: dict[str, Any] = {
            "id": 100 + mr.iid,
            "iid": mr.iid,
            "project_id": self.project_id,
            "title": mr.title,
            "description": mr.description,
            "state": mr.state,
            "created_at": mr.created_at,
            "updated_at": mr.updated_at,
            "merged_by": user if merged else None,
            "merge_user": user if merged else None,
            "merged_at": mr.updated_at if merged else None,
            "closed_by": user if mr.state == "closed" else None,
            "closed_at": mr.updated_at if mr.state == "closed" else None,
            "target_branch": mr.target_branch,
            "source_branch": mr.source_branch,
            "user_notes_count": 0,
            "upvotes": 0,
            "downvotes": 0,
            "author": user,
            "assignees": [],
            "assignee": None,
            "reviewers": [],
            "source_project_id": mr.source_project_id,
            "target_project_id": self.project_id,
            "labels": [],
            "draft": False,
            "work_in_progress": False,
            "milestone": None,
            "merge_when_pipeline_succeeds": False,
            "merge_status": "can_be_merged",
            "detailed_merge_status": "mergeable" if mr.state == "opened" else "not_open",
            "sha": "8888888888888888888888888888888888888888",
            "merge_commit_sha": mr.merge_commit_sha if merged else None,
            "squash_commit_sha": None,
            "discussion_locked": None,
            "should_remove_source_branch": None,
            "force_remove_source_branch": False,
            "reference": f"!{mr.iid}",
            "references": {
                "short": f"!{mr.iid}",
                "relative": f"!{mr.iid}",
                "full": f"{self.project_path}!{mr.iid}",
            },
            "web_url": f"{self.base_url}/{self.project_path}/-/merge_requests/{mr.iid}",
            "time_stats": {
                "time_estimate": 0,
                "total_time_spent": 0,
                "human_time_estimate": None,
                "human_total_time_spent": None,
            },
            "squash": False,
            "task_completion_status": {"count": 0, "completed_count": 0},
            "has_conflicts": False,
            "blocking_discussions_resolved": True,
        }
        if full:
            data.update(
                subscribed=True,
                changes_count=str(len(self.branches.get(mr.source_branch, []))),
                latest_build_started_at=None,
                latest_build_finished_at=None,
                first_deployed_to_production_at=None,
                pipeline=None,
                head_pipeline=None,
                diff_refs={"base_sha": "1" * 40, "head_sha": "8" * 40, "start_sha": "1" * 40},
                merge_error=None,
                first_contribution=False,
                user={"can_merge": True},
            )
        return data

    @staticmethod
    def _diff_json(d: dict[str, Any]) -> dict[str, Any]:
        return {
            "old_path": d.get("old_path", d["new_path"]),
            "new_path": d["new_path"],
            "a_mode": "0" if d.get("new_file") else "100644",
            "b_mode": "0" if d.get("deleted_file") else "100644",
            "diff": "@@ -1 +1 @@\n-old\n+new\n",
            "new_file": bool(d.get("new_file")),
            "renamed_file": bool(d.get("renamed_file")),
            "deleted_file": bool(d.get("deleted_file")),
            "generated_file": False,
        }

    def _page(self, items: list[Any], query: dict[str, str], req: Request) -> Response:
        per_page = min(int(query.get("per_page", 20)), 100)
        page = int(query.get("page", 1))
        total_pages = max(1, (len(items) + per_page - 1) // per_page)
        headers = {
            "X-Page": str(page),
            "X-Per-Page": str(per_page),
            "X-Total": str(len(items)),
            "X-Total-Pages": str(total_pages),
            "X-Next-Page": str(page + 1) if page < total_pages else "",
            "X-Prev-Page": str(page - 1) if page > 1 else "",
        }
        url = f"{self.base_url}{req.path}"

        def link(p: int) -> str:
            return f"{url}?{urlencode({**query, 'page': p, 'per_page': per_page})}"

        links = [f'<{link(page + 1)}>; rel="next"'] if page < total_pages else []
        links += [f'<{link(1)}>; rel="first"', f'<{link(total_pages)}>; rel="last"']
        headers["Link"] = ", ".join(links)
        return Response(200, items[(page - 1) * per_page : page * per_page], headers)


def rate_limited(retry_after: int = 60) -> tuple[dict[str, Any], dict[str, str]]:
    """GitLab's 429, with its documented headers."""
    reset = int(time.time()) + retry_after
    headers = {
        "Retry-After": str(retry_after),
        "RateLimit-Limit": "600",
        "RateLimit-Observed": "601",
        "RateLimit-Remaining": "0",
        "RateLimit-Reset": str(reset),
        "RateLimit-ResetTime": datetime.fromtimestamp(reset, UTC).strftime("%a, %d %b %Y %H:%M:%S GMT"),
    }
    return {"message": "Retry later"}, headers
