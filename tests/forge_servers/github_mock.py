"""A stateful GitHub REST mock that checks every request against GitHub's
own OpenAPI description (``tests/fixtures/github-openapi``).

- A request that does not validate is recorded in ``failures`` and answered
  ``400``; the test fixture fails the test if ``failures`` is not empty.
- Responses are built from the description's examples, with the keys
  github3.py needs that the examples omit (``body_html``, ``body_text``,
  ``language``), URLs pointing back at the mock, and state from earlier calls;
  every response is validated against the description too.
- ``force()`` queues a canned answer (401, 403 rate limit, 500 ...) for the
  next matching operation; ``hide_open_pulls`` makes the next list of pulls
  come back empty (a create racing another create).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlencode

import jwt

from .http import MockHTTPServer, Request, Response
from .openapi import OpenAPI, SpecViolation

SPEC_PATH = Path(__file__).resolve().parents[1] / "fixtures" / "github-openapi" / "api.github.com.subset.json"
DOCS = "https://docs.github.com/rest"
_SPEC: OpenAPI | None = None


def load_spec() -> OpenAPI:
    global _SPEC
    if _SPEC is None:
        _SPEC = OpenAPI(SPEC_PATH)
    return _SPEC


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Forced:
    operation: str | None  # operationId, or None for any
    response: Response
    times: int = 1


@dataclass
class Pull:
    number: int
    title: str
    body: str
    head: str
    base: str
    state: str = "open"
    merged: bool = False
    merge_commit_sha: str | None = None
    created_at: str = field(default_factory=_now)
    updated_at: str = field(default_factory=_now)


@dataclass
class Seen:
    operation: str
    method: str
    path: str
    query: dict[str, Any]
    body: Any
    headers: dict[str, str]


class GitHubMock:
    def __init__(
        self,
        *,
        owner: str = "octo-org",
        repo: str = "docs",
        token: str = "ghp_" + "T0k3n" * 8,
        app_id: int = 4242,
        app_public_key: bytes | None = None,
        installation_id: int = 77,
    ) -> None:
        self.spec = load_spec()
        self.owner, self.repo = owner, repo
        self.token = token
        self.app_id = app_id
        self.app_public_key = app_public_key
        self.installation_id = installation_id
        self.installation_token_ttl = timedelta(hours=1)
        self.installation_tokens: list[str] = []
        self.default_branch = "main"
        self.branches: dict[str, list[dict[str, Any]]] = {"main": []}
        self.pulls: dict[int, Pull] = {}
        self.failures: list[str] = []
        self.seen: list[Seen] = []
        self.hide_open_pulls = 0
        self._forced: list[Forced] = []
        self._lock = threading.Lock()
        self._server = MockHTTPServer(self.handle)

    # -- test controls ----------------------------------------------------------

    @property
    def base_url(self) -> str:
        return self._server.base_url

    def start(self) -> GitHubMock:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def push_branch(self, name: str, files: list[dict[str, Any]]) -> None:
        """A head branch and the diff entries its PR will list:
        ``{"filename", "status", "previous_filename"?}``."""
        self.branches[name] = files

    def force(
        self, status: int, body: Any, *, operation: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        self._forced.append(Forced(operation, Response(status, body, dict(headers or {}))))

    def ops(self) -> list[str]:
        return [s.operation for s in self.seen]

    # -- dispatch ---------------------------------------------------------------

    def handle(self, req: Request) -> Response:
        with self._lock:
            try:
                valid = self.spec.validate_request(req.method, req.path, req.query, req.headers, req.body)
            except SpecViolation as exc:
                self.failures.append(str(exc))
                return Response(400, {"message": f"mock: not a described request: {exc}"})
            op = valid.operation.operation_id
            self.seen.append(Seen(op, req.method, req.path, valid.query, valid.body, req.headers))
            accept = req.headers.get("accept", "")
            if not any(t in accept for t in ("application/vnd.github", "application/json", "*/*")):
                self.failures.append(f"{op}: unexpected Accept {accept!r}")
            resp = (
                self._authorize(op, req) or self._forced_for(op) or self._answer(op, valid.path_params, valid)
            )
            self._check_response(valid.operation, resp)
            resp.headers.setdefault("X-RateLimit-Limit", "5000")
            resp.headers.setdefault("X-RateLimit-Remaining", "4999")
            resp.headers.setdefault("X-GitHub-Media-Type", "github.v3; param=full; format=json")
            return resp

    def _check_response(self, op: Any, resp: Response) -> None:
        try:
            if not self.spec.validate_response(op, resp.status, resp.body) and resp.status >= 400:
                # Undescribed error status (401 on pulls/list, 429 ...): GitHub's error shape.
                self.spec.validate_schema(resp.body, "/components/schemas/basic-error", "error body")
        except SpecViolation as exc:
            self.failures.append(f"mock answered outside the description: {exc}")

    def _forced_for(self, op: str) -> Response | None:
        for i, forced in enumerate(self._forced):
            if forced.operation in (None, op):
                forced.times -= 1
                if forced.times <= 0:
                    del self._forced[i]
                return Response(forced.response.status, forced.response.body, dict(forced.response.headers))
        return None

    def _authorize(self, op: str, req: Request) -> Response | None:
        auth = req.headers.get("authorization", "")
        if op in ("apps/get-repo-installation", "apps/create-installation-access-token"):
            scheme, _, jwt_token = auth.partition(" ")
            if scheme != "Bearer" or self.app_public_key is None:
                return _error(401, "A JSON web token could not be decoded")
            try:
                claims = jwt.decode(
                    jwt_token,
                    self.app_public_key,
                    algorithms=["RS256"],
                    options={"require": ["iat", "exp", "iss"], "verify_iss": False},
                )
            except jwt.PyJWTError as exc:
                return _error(401, f"A JSON web token could not be decoded ({type(exc).__name__})")
            if str(claims["iss"]) != str(self.app_id):
                return _error(401, "Integration not found")
            return None
        scheme, _, token = auth.partition(" ")
        if scheme.lower() not in ("token", "bearer") or token not in (self.token, *self.installation_tokens):
            return _error(401, "Bad credentials")
        return None

    def _answer(self, op: str, params: dict[str, Any], valid: Any) -> Response:
        if op.startswith("apps/"):
            return self._apps(op, params)
        if (params["owner"].lower(), params["repo"].lower()) != (self.owner.lower(), self.repo.lower()):
            return _error(404, "Not Found")
        handler: dict[str, Callable[[], Response]] = {
            "repos/get": lambda: Response(200, self._repo_json()),
            "pulls/list": lambda: self._list_pulls(valid.query),
            "pulls/create": lambda: self._create_pull(valid.body),
            "pulls/get": lambda: self._get_pull(params["pull_number"]),
            "pulls/update": lambda: self._update_pull(params["pull_number"], valid.body or {}),
            "pulls/list-files": lambda: self._list_files(params["pull_number"], valid.query),
        }
        return handler[op]()

    # -- operations ------------------------------------------------------------

    def _apps(self, op: str, params: dict[str, Any]) -> Response:
        if op == "apps/get-repo-installation":
            if (params["owner"], params["repo"]) != (self.owner, self.repo):
                return _error(404, "Not Found")
            inst = self._rewrite(self.spec.example("installation"))
            inst["id"] = self.installation_id
            return Response(200, inst)
        if params["installation_id"] != self.installation_id:
            return _error(404, "Not Found")
        token = "ghs_" + secrets.token_hex(18)
        self.installation_tokens.append(token)
        body = self._rewrite(self.spec.example("installation-token"))
        body["token"] = token
        body["expires_at"] = (datetime.now(UTC) + self.installation_token_ttl).strftime("%Y-%m-%dT%H:%M:%SZ")
        return Response(201, body)

    def _list_pulls(self, query: dict[str, Any]) -> Response:
        if self.hide_open_pulls > 0:
            self.hide_open_pulls -= 1
            return Response(200, [])
        state = query.get("state", "open")
        head = query.get("head")
        if head is not None and ":" not in head:
            self.failures.append(f"pulls/list: head filter {head!r} is not 'user:ref-name'")
        pulls = sorted(
            self.pulls.values(), key=lambda p: p.number, reverse=query.get("direction", "desc") == "desc"
        )
        out = []
        for p in pulls:
            if state != "all" and p.state != state:
                continue
            if head is not None and head.lower() != f"{self.owner}:{p.head}".lower():
                continue
            if query.get("base") not in (None, p.base):
                continue
            out.append(self._pull_json(p, full=False))
        return self._page(out, query)

    def _create_pull(self, body: dict[str, Any]) -> Response:
        head = body["head"].split(":", 1)[-1] if ":" in body["head"] else body["head"]
        if ":" in body["head"] and body["head"].split(":", 1)[0].lower() != self.owner.lower():
            return _validation({"resource": "PullRequest", "field": "head", "code": "invalid"})
        if body["base"] not in self.branches:
            return _validation({"resource": "PullRequest", "field": "base", "code": "invalid"})
        if head not in self.branches:
            return _validation({"resource": "PullRequest", "field": "head", "code": "invalid"})
        for p in self.pulls.values():
            if p.state == "open" and p.head == head and p.base == body["base"]:
                msg = f"A pull request already exists for {self.owner}:{head}."
                return _validation({"resource": "PullRequest", "code": "custom", "message": msg})
        if not self.branches[head]:
            msg = f"No commits between {body['base']} and {head}"
            return _validation({"resource": "PullRequest", "code": "custom", "message": msg})
        number = max(self.pulls, default=0) + 1
        pull = Pull(number, body.get("title", ""), body.get("body", ""), head, body["base"])
        self.pulls[number] = pull
        data = self._pull_json(pull, full=True)
        return Response(201, data, {"Location": data["url"]})

    def _get_pull(self, number: int) -> Response:
        pull = self.pulls.get(number)
        return Response(200, self._pull_json(pull, full=True)) if pull else _error(404, "Not Found")

    def _update_pull(self, number: int, body: dict[str, Any]) -> Response:
        pull = self.pulls.get(number)
        if pull is None:
            return _error(404, "Not Found")
        if "base" in body and body["base"] not in self.branches:
            return _validation({"resource": "PullRequest", "field": "base", "code": "invalid"})
        for key in ("title", "body", "state", "base"):
            if key in body:
                setattr(pull, key, body[key])
        pull.updated_at = _now()
        return Response(200, self._pull_json(pull, full=True))

    def _list_files(self, number: int, query: dict[str, Any]) -> Response:
        pull = self.pulls.get(number)
        if pull is None:
            return _error(404, "Not Found")
        template = self.spec.example("diff-entry-items")[0]
        out = []
        for i, f in enumerate(self.branches.get(pull.head, [])):
            entry = json.loads(json.dumps(template).replace("file1.txt", f["filename"]))
            entry = self._rewrite(entry)
            entry.update(filename=f["filename"], status=f["status"], sha=f"{i + 1:040x}")
            if f.get("previous_filename"):
                entry["previous_filename"] = f["previous_filename"]
            out.append(entry)
        return self._page(out, query)

    # -- shapes ----------------------------------------------------------------

    def _rewrite(self, data: Any) -> Any:
        text = json.dumps(data)
        text = text.replace("https://api.github.com", self.base_url)
        text = text.replace("octocat/Hello-World", f"{self.owner}/{self.repo}")
        return json.loads(text)

    def _repo_json(self) -> dict[str, Any]:
        data = cast(dict[str, Any], self._rewrite(self.spec.example("full-repository-default-response")))
        data.update(name=self.repo, full_name=f"{self.owner}/{self.repo}", default_branch=self.default_branch)
        data["owner"]["login"] = self.owner
        data.setdefault("language", None)
        for nested in ("parent", "source", "template_repository"):
            if isinstance(data.get(nested), dict):
                data[nested].setdefault("language", None)
        return data

    def _pull_json(self, pull: Pull, *, full: bool) -> dict[str, Any]:
        raw = self.spec.example("pull-request") if full else self.spec.example("pull-request-simple-items")[0]
        text = json.dumps(raw)
        for old in ("/pulls/1347", "/pull/1347", "/issues/1347"):
            text = text.replace(old, old.replace("1347", str(pull.number)))
        data = cast(dict[str, Any], self._rewrite(json.loads(text)))
        data.update(
            number=pull.number,
            id=1000 + pull.number,
            title=pull.title,
            body=pull.body,
            body_html=f"<p>{pull.body}</p>",
            body_text=pull.body,
            state=pull.state,
            locked=False,
            active_lock_reason=None,
            draft=False,
            created_at=pull.created_at,
            updated_at=pull.updated_at,
            closed_at=None if pull.state == "open" else pull.updated_at,
            merged_at=pull.updated_at if pull.merged else None,
            merge_commit_sha=pull.merge_commit_sha,
            requested_teams=[],
        )
        data["head"].update(ref=pull.head, label=f"{self.owner}:{pull.head}")
        data["base"].update(ref=pull.base, label=f"{self.owner}:{pull.base}")
        if full:
            files = self.branches.get(pull.head, [])
            data.update(merged=pull.merged, changed_files=len(files), mergeable=True, merged_by=None)
        return data

    def _page(self, items: list[Any], query: dict[str, Any]) -> Response:
        per_page = min(int(query.get("per_page", 30)), 100)
        page = int(query.get("page", 1))
        chunk = items[(page - 1) * per_page : page * per_page]
        headers = {}
        if page * per_page < len(items):
            params = {k: v for k, v in query.items() if k != "page"}
            last = (len(items) + per_page - 1) // per_page
            url = f"{self.base_url}{self.seen[-1].path}"
            headers["Link"] = (
                f'<{url}?{urlencode({**params, "page": page + 1})}>; rel="next", '
                f'<{url}?{urlencode({**params, "page": last})}>; rel="last"'
            )
        return Response(200, chunk, headers)


def _error(status: int, message: str) -> Response:
    return Response(status, {"message": message, "documentation_url": DOCS, "status": str(status)})


def _validation(*errors: dict[str, Any]) -> Response:
    body = {
        "message": "Validation Failed",
        "errors": list(errors),
        "documentation_url": DOCS,
        "status": "422",
    }
    return Response(422, body)


def rate_limited(reset_in: int = 120) -> tuple[dict[str, Any], dict[str, str]]:
    """GitHub's primary rate-limit answer (403), with its headers."""
    reset = int(time.time()) + reset_in
    body = {
        "message": "API rate limit exceeded for installation ID 77.",
        "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
        "status": "403",
    }
    headers = {
        "X-RateLimit-Limit": "5000",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Used": "5000",
        "X-RateLimit-Reset": str(reset),
        "X-RateLimit-Resource": "core",
    }
    return body, headers
