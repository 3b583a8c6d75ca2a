"""The GitHub forge, through github3.py.

Requests (all checked against GitHub's REST description in the tests):

- ``GET /repos/{owner}/{repo}`` once, cached;
- ``GET /repos/{owner}/{repo}/pulls?state=open&head=owner:branch``;
- ``POST /repos/{owner}/{repo}/pulls``;
- ``GET`` / ``PATCH /repos/{owner}/{repo}/pulls/{number}``;
- ``GET /repos/{owner}/{repo}/pulls/{number}/files`` (GitHub lists at most
  3000 files of a pull request);
- GitHub App only: ``GET /repos/{owner}/{repo}/installation`` (when no
  installation id is configured) and
  ``POST /app/installations/{id}/access_tokens``; the installation token is
  renewed when it expires.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import github3
import jwt
from github3 import exceptions as gh_exc
from github3.session import GitHubSession

from gitkb.core.errors import ForgeError, InvalidArgument

from .base import ChangeRequest, ChangeState, FileStatus, ForgeConfig, changed_file
from .failures import (
    ALREADY_EXISTS,
    AUTH,
    CONNECTION,
    PROTOCOL,
    connection_reason,
    describe,
    forge_error,
    is_rate_limited,
    kind_for_status,
    rate_limit_error,
)

DEFAULT_API_URL = "https://api.github.com"

# GitHub's diff-entry statuses -> gitkb's. ``copied`` is a new path; ``changed``
# and ``unchanged`` (mode-only) count as modified.
FILE_STATUS: dict[str, FileStatus] = {
    "added": "A",
    "copied": "A",
    "modified": "M",
    "changed": "M",
    "unchanged": "M",
    "removed": "D",
    "renamed": "R",
}

T = TypeVar("T")


class GitHubForge:
    """Pull requests on one GitHub (or GitHub Enterprise Server) repository."""

    name = "github"

    def __init__(self, config: ForgeConfig, *, session: GitHubSession | None = None) -> None:
        owner, _, repo = config.repo.strip("/").partition("/")
        if not owner or not repo or "/" in repo:
            raise InvalidArgument(f"GitHub repo must be 'owner/name', got {config.repo!r}")
        if config.token is None and not (config.app_id and config.app_private_key):
            raise InvalidArgument(
                "the GitHub forge needs a token, or a GitHub App id and private key",
                next_steps=["set token_env (or a secrets file key) in the forge config"],
            )
        self._config = config
        self.owner, self.repo = owner, repo
        self.api_url = (config.api_url or DEFAULT_API_URL).rstrip("/")
        sess = session or GitHubSession(
            default_connect_timeout=config.timeout, default_read_timeout=config.timeout
        )
        sess.base_url = self.api_url
        self._gh = github3.GitHub(session=sess)
        self._repository: Any = None
        self._authenticated = False
        self._installation_id = config.installation_id
        self._runtime_secrets: list[str] = []

    # -- the Forge protocol -------------------------------------------------

    def find_open_by_head(self, head: str) -> ChangeRequest | None:
        def run() -> ChangeRequest | None:
            pulls = self._repo().pull_requests(state="open", head=f"{self.owner}:{head}")
            for pr in pulls:
                if pr.head.ref == head:
                    return _change_request(pr)
            return None

        return self._call(f"list open pull requests for {head!r}", run)

    def create(self, *, head: str, base: str, title: str, body: str) -> ChangeRequest:
        def run() -> ChangeRequest:
            pr = self._repo().create_pull(title=title, base=base, head=head, body=body)
            if pr is None:
                raise forge_error(self.name, PROTOCOL, "GitHub: create pull request returned no body")
            return _change_request(pr)

        return self._call(f"create a pull request {head!r} -> {base!r}", run)

    def update(self, number: int, *, title: str, body: str) -> ChangeRequest:
        def run() -> ChangeRequest:
            pr = self._pull(number)
            if not pr.update(title=title, body=body):
                raise forge_error(
                    self.name, PROTOCOL, f"GitHub: update of pull request #{number} returned no body"
                )
            return _change_request(pr)

        return self._call(f"update pull request #{number}", run)

    def get(self, number: int) -> ChangeRequest:
        return self._call(f"get pull request #{number}", lambda: _change_request(self._pull(number)))

    def changed_files(self, number: int) -> list[dict[str, str]]:
        def run() -> list[dict[str, str]]:
            out = []
            for entry in self._pull(number).files():
                data = entry.as_dict()
                status: FileStatus = FILE_STATUS.get(data.get("status", ""), "M")
                out.append(changed_file(data["filename"], status, data.get("previous_filename")))
            return out

        return self._call(f"list files of pull request #{number}", run)

    # -- plumbing -----------------------------------------------------------

    def _repo(self) -> Any:
        if self._repository is None:
            self._repository = self._gh.repository(self.owner, self.repo)
        return self._repository

    def _pull(self, number: int) -> Any:
        pr = self._repo().pull_request(int(number))
        if pr is None:
            raise forge_error(self.name, PROTOCOL, f"GitHub: pull request #{number} returned no body")
        return pr

    def _authenticate(self) -> None:
        cfg = self._config
        if cfg.token is not None:
            self._gh.login(token=cfg.token.reveal())
        else:
            assert cfg.app_private_key is not None and cfg.app_id is not None
            key = cfg.app_private_key.reveal().encode()
            app_id = str(cfg.app_id)  # PyJWT >= 2.10 wants a string "iss"
            if self._installation_id is None:
                self._gh.login_as_app(key, app_id)
                installation = self._gh.app_installation_for_repository(self.owner, self.repo)
                self._installation_id = int(installation.id)
            self._gh.login_as_app_installation(key, app_id, self._installation_id)
            token = getattr(self._gh.session.auth, "token", None)
            if token:
                self._runtime_secrets.append(token)
        self._authenticated = True

    def _authenticate_or_fail(self, what: str) -> None:
        try:
            self._authenticate()
        except (ValueError, TypeError, jwt.PyJWTError) as exc:  # a key PyJWT cannot sign with
            raise forge_error(
                self.name,
                AUTH,
                f"GitHub: {what} failed: the GitHub App private key cannot sign a token ({type(exc).__name__})",
                secrets=self._secrets(),
            ) from None

    def _secrets(self) -> list[Any]:
        return [*self._config.secrets(), *self._runtime_secrets]

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        for attempt in (1, 2):
            try:
                if not self._authenticated:
                    self._authenticate_or_fail(what)
                return fn()
            except ForgeError:
                raise
            except gh_exc.GeneratedTokenExpired:
                self._authenticated = False
                self._repository = None
                if attempt == 2:
                    raise forge_error(
                        self.name,
                        AUTH,
                        f"GitHub: {what} failed: the GitHub App token expired and could not be renewed",
                    ) from None
            except gh_exc.ResponseError as exc:
                raise self._from_response(what, exc) from None
            except gh_exc.TransportError as exc:
                reason = connection_reason(exc.exception)
                raise forge_error(
                    self.name,
                    CONNECTION,
                    f"GitHub: {what} failed: cannot reach {self.api_url}: {reason}",
                    secrets=self._secrets(),
                    api_url=self.api_url,
                ) from None
            except gh_exc.GitHubException as exc:
                raise forge_error(
                    self.name,
                    PROTOCOL,
                    f"GitHub: {what} failed: unexpected response ({type(exc).__name__}): {exc}",
                    secrets=self._secrets(),
                ) from None
        raise AssertionError("unreachable")

    def _from_response(self, what: str, exc: gh_exc.ResponseError) -> ForgeError:
        status = int(exc.code or 0)
        headers = dict(exc.response.headers) if exc.response is not None else {}
        message = exc.msg.decode("utf-8", "replace") if isinstance(exc.msg, bytes) else str(exc.msg or "")
        errors = [_error_text(e) for e in (exc.errors or [])]
        text = message + (": " + "; ".join(e for e in errors if e) if any(errors) else "")
        if is_rate_limited(status, headers, message):
            return rate_limit_error("github", status, headers, text, secrets=self._secrets())
        kind = kind_for_status(status)
        if status == 422 and "already exists" in text.lower():
            kind = ALREADY_EXISTS
        return forge_error(
            self.name,
            kind,
            f"GitHub: {what} failed ({status}, {describe(kind)}): {text}",
            secrets=self._secrets(),
            status=status,
            forge_message=text,
        )


def _error_text(err: Any) -> str:
    if isinstance(err, dict):
        if err.get("message"):
            return str(err["message"])
        parts = [str(err.get(k)) for k in ("resource", "field", "code") if err.get(k)]
        return " ".join(parts)
    return str(err)


def _change_request(pr: Any) -> ChangeRequest:
    merged = bool(getattr(pr, "merged", False)) or pr.merged_at is not None
    state: ChangeState = "merged" if merged else ("open" if pr.state == "open" else "closed")
    return ChangeRequest(
        number=int(pr.number),
        url=str(pr.html_url),
        state=state,
        head=str(pr.head.ref),
        base=str(pr.base.ref),
        title=str(pr.title),
        merged=merged,
        merge_commit_sha=pr.merge_commit_sha if merged else None,
    )


def create(config: ForgeConfig) -> GitHubForge:
    """The registry factory."""
    return GitHubForge(config)
