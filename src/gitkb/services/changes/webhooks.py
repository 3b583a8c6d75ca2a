"""Forge webhooks, the pure part: signatures, payload parsing, repository URL matching.

No I/O here. The HTTP route reads the raw body and the headers, finds the
source, and calls these functions; what comes out is a ``WebhookEvent`` that
says which commit of which branch the source should be synced to.

* GitHub signs the raw body: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256>``.
  Events: ``ping``; ``pull_request`` with ``action: closed`` and
  ``pull_request.merged: true`` (``merge_commit_sha`` on ``base.ref``);
  ``push`` to a branch (``before`` .. ``after``; an all-zero ``before`` is a new
  branch, ``deleted: true`` a removed one).
* GitLab sends the shared secret as ``X-Gitlab-Token``. Events (``X-Gitlab-Event``):
  ``Merge Request Hook`` with ``object_attributes.action: merge`` or
  ``state: merged``; ``Push Hook``.
* Generic (CI): ``{"source": NAME, "commit": SHA}``.

A signed delivery is for the repository its payload names (GitHub ``repository``: ``clone_url``,
``html_url``, ``ssh_url``, ... and ``full_name``; GitLab ``project``: ``git_http_url``,
``git_ssh_url``, ``web_url``, ... and ``path_with_namespace``): ``names_repository`` says whether
that is the source's remote (``repository_identity`` takes no user-set field such as GitHub's
``homepage``), so a delivery for repository X sent to ``?source=NAME`` of repository Y is refused.

The changed files are never taken from the payload (GitHub caps those lists):
the event carries the commit range, and sync diffs the trees itself.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from gitkb.core.errors import InvalidArgument

ZERO_SHA = re.compile(r"^0+$")
SHA = re.compile(r"^[0-9a-fA-F]{7,64}$")
SCP_LIKE = re.compile(r"^(?:[^@/\s]+@)?(?P<host>[^:/\s]+):(?!//)(?P<path>.+)$")


@dataclass(frozen=True)
class RepositoryIdentity:
    """The repository a payload is for: its URLs and its ``owner/name`` (full_name, path_with_namespace)."""

    urls: tuple[str, ...] = ()
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class WebhookEvent:
    """What a delivery asks for. ``kind``: ``merge``, ``push``, ``ping`` or ``ignored``."""

    provider: str
    kind: str
    repo_urls: tuple[str, ...] = ()
    branch: str | None = None
    commit: str | None = None
    before: str | None = None  # the range start; None for a new branch or a merge
    new_branch: bool = False
    reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    repository: RepositoryIdentity = RepositoryIdentity()

    @property
    def wants_sync(self) -> bool:
        return self.kind in ("merge", "push") and bool(self.commit)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"provider": self.provider, "event": self.kind}
        for k in ("branch", "commit", "before"):
            v = getattr(self, k)
            if v:
                out[k] = v
        if self.new_branch:
            out["new_branch"] = True
        if self.reason:
            out["reason"] = self.reason
        return out


# -- signatures -------------------------------------------------------------------------------


def _bytes(v: str | bytes) -> bytes:
    return v.encode("utf-8") if isinstance(v, str) else v


def github_signature(secret: str | bytes, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value GitHub sends for ``body``."""
    return "sha256=" + hmac.new(_bytes(secret), body, hashlib.sha256).hexdigest()


def verify_github_signature(secret: str | bytes | None, body: bytes, header: str | None) -> bool:
    """Constant-time check of ``X-Hub-Signature-256``; a missing secret or header is a failure."""
    if not secret or not header:
        return False
    return hmac.compare_digest(_bytes(github_signature(secret, body)), _bytes(header.strip()))


def verify_gitlab_token(secret: str | bytes | None, header: str | None) -> bool:
    """Constant-time check of ``X-Gitlab-Token`` against the source's secret."""
    if not secret or not header:
        return False
    return hmac.compare_digest(_bytes(secret), _bytes(header))


# -- payloads ---------------------------------------------------------------------------------


def decode_json(body: bytes) -> dict[str, Any]:
    """The payload as a JSON object, or ``InvalidArgument``."""
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidArgument(f"the payload is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidArgument("the payload must be a JSON object")
    return data


def _get(d: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


def _urls(*candidates: Any) -> tuple[str, ...]:
    seen: list[str] = []
    for c in candidates:
        if isinstance(c, str) and c.strip() and c not in seen:
            seen.append(c.strip())
    return tuple(seen)


def _sha(v: Any) -> str | None:
    return v if isinstance(v, str) and SHA.match(v) and not ZERO_SHA.match(v) else None


def _branch_of(ref: Any) -> str | None:
    if isinstance(ref, str) and ref.startswith("refs/heads/"):
        return ref[len("refs/heads/") :]
    return None


def _repo_urls(repo: Any) -> list[Any]:
    keys = (
        "clone_url",
        "ssh_url",
        "html_url",
        "git_url",
        "svn_url",
        "url",
        "git_http_url",
        "git_ssh_url",
        "web_url",
        "http_url",
        "homepage",
    )
    return [_get(repo, k) for k in keys]


def _push(provider: str, payload: dict[str, Any], urls: tuple[str, ...]) -> WebhookEvent:
    ref = payload.get("ref")
    branch = _branch_of(ref)
    if branch is None:
        return WebhookEvent(provider, "ignored", urls, reason=f"push to {ref!r} is not a branch")
    after = payload.get("after")
    if payload.get("deleted") is True or (isinstance(after, str) and ZERO_SHA.match(after)):
        return WebhookEvent(provider, "ignored", urls, branch=branch, reason="the branch was deleted")
    commit = _sha(after) or _sha(payload.get("checkout_sha"))
    if commit is None:
        raise InvalidArgument("push payload has no valid 'after' commit")
    raw_before = payload.get("before")
    new_branch = raw_before is None or (isinstance(raw_before, str) and bool(ZERO_SHA.match(raw_before)))
    return WebhookEvent(
        provider, "push", urls, branch=branch, commit=commit, before=_sha(raw_before), new_branch=new_branch
    )


def repository_urls(provider: str, payload: dict[str, Any]) -> tuple[str, ...]:
    """Every repository URL a payload names (to find its source before the body is trusted)."""
    if provider == "github":
        return _urls(
            *_repo_urls(payload.get("repository")), *_repo_urls(_get(payload, "pull_request", "base", "repo"))
        )
    if provider == "gitlab":
        return _urls(
            *_repo_urls(payload.get("project")),
            *_repo_urls(payload.get("repository")),
            *_repo_urls(_get(payload, "object_attributes", "target")),
        )
    return ()


# Generated by the forge for the repository itself (GitHub's ``homepage`` is set by its owner: not here).
_GITHUB_KEYS = ("clone_url", "html_url", "ssh_url", "git_url", "svn_url", "url")
_GITLAB_KEYS = ("git_http_url", "git_ssh_url", "web_url", "http_url", "ssh_url", "url", "homepage")


def repository_identity(provider: str, payload: dict[str, Any]) -> RepositoryIdentity:
    """The repository a GitHub (``repository``) or GitLab (``project``, and the older
    ``repository``) payload is for; empty for any other provider."""
    if provider == "github":
        repo = payload.get("repository")
        return RepositoryIdentity(
            _urls(*(_get(repo, k) for k in _GITHUB_KEYS)), _urls(_get(repo, "full_name"))
        )
    if provider == "gitlab":
        project, legacy = payload.get("project"), payload.get("repository")
        urls = _urls(*(_get(project, k) for k in _GITLAB_KEYS), *(_get(legacy, k) for k in _GITLAB_KEYS))
        return RepositoryIdentity(urls, _urls(_get(project, "path_with_namespace")))
    return RepositoryIdentity()


def names_repository(identity: RepositoryIdentity, remote: str) -> bool:
    """The payload is for ``remote``: one of its repository's URLs is ``remote``, and its
    ``owner/name``, when given, ends ``remote``'s path (for a remote on a host). No URL: not."""
    if not any(same_repository(u, remote) for u in identity.urls):
        return False
    norm = normalise_repo_url(remote)
    if norm.startswith("file:"):
        return True
    path = norm.split("/", 1)[1] if "/" in norm else ""
    names = [_clean_path(n.strip(), lower=True).strip("/") for n in identity.names]
    # the path ends with owner/name (a GitLab under a relative URL root: /gitlab/group/project)
    return all(n and (path == n or path.endswith("/" + n)) for n in names)


def parse_github(event: str | None, payload: dict[str, Any]) -> WebhookEvent:
    """``X-GitHub-Event`` + the decoded body → a ``WebhookEvent``."""
    return replace(_parse_github(event, payload), repository=repository_identity("github", payload))


def _parse_github(event: str | None, payload: dict[str, Any]) -> WebhookEvent:
    repo = payload.get("repository")
    if event == "ping":
        return WebhookEvent("github", "ping", _urls(*_repo_urls(repo)), extra={"zen": payload.get("zen")})
    if event == "push":
        return _push("github", payload, _urls(*_repo_urls(repo)))
    if event == "pull_request":
        pr = payload.get("pull_request")
        base_repo = _get(pr, "base", "repo")
        urls = _urls(*_repo_urls(repo), *_repo_urls(base_repo))
        if payload.get("action") != "closed":
            return WebhookEvent(
                "github", "ignored", urls, reason=f"pull_request action {payload.get('action')!r}"
            )
        if _get(pr, "merged") is not True:
            return WebhookEvent(
                "github", "ignored", urls, reason="the pull request was closed without merging"
            )
        commit = _sha(_get(pr, "merge_commit_sha"))
        branch = _get(pr, "base", "ref")
        if commit is None or not isinstance(branch, str) or not branch:
            raise InvalidArgument("a merged pull_request needs merge_commit_sha and base.ref")
        return WebhookEvent(
            "github", "merge", urls, branch=branch, commit=commit, extra={"number": _get(pr, "number")}
        )
    return WebhookEvent(
        "github", "ignored", _urls(*_repo_urls(repo)), reason=f"event {event!r} is not handled"
    )


def parse_gitlab(event: str | None, payload: dict[str, Any]) -> WebhookEvent:
    """``X-Gitlab-Event`` + the decoded body → a ``WebhookEvent``."""
    return replace(_parse_gitlab(event, payload), repository=repository_identity("gitlab", payload))


def _parse_gitlab(event: str | None, payload: dict[str, Any]) -> WebhookEvent:
    project = payload.get("project")
    urls = _urls(*_repo_urls(project), *_repo_urls(payload.get("repository")))
    if event == "Push Hook":
        return _push("gitlab", payload, urls)
    if event == "Merge Request Hook":
        attrs = payload.get("object_attributes") or {}
        urls = _urls(*urls, *_repo_urls(_get(attrs, "target")))
        if _get(attrs, "action") != "merge" and _get(attrs, "state") != "merged":
            return WebhookEvent(
                "gitlab", "ignored", urls, reason=f"merge request action {_get(attrs, 'action')!r}"
            )
        # merge_commit_sha is null for fast-forward merges; squash_commit_sha for squash-only merges.
        commit = (
            _sha(_get(attrs, "merge_commit_sha"))
            or _sha(_get(attrs, "squash_commit_sha"))
            or _sha(_get(attrs, "last_commit", "id"))
        )
        branch = _get(attrs, "target_branch")
        if commit is None or not isinstance(branch, str) or not branch:
            raise InvalidArgument("a merged merge request needs a merge commit and target_branch")
        return WebhookEvent(
            "gitlab", "merge", urls, branch=branch, commit=commit, extra={"iid": _get(attrs, "iid")}
        )
    return WebhookEvent("gitlab", "ignored", urls, reason=f"event {event!r} is not handled")


def parse_generic(payload: dict[str, Any]) -> tuple[str, str]:
    """``{"source": NAME, "commit": SHA}`` → ``(source, commit)``."""
    source, commit = payload.get("source"), payload.get("commit")
    unknown = sorted(set(payload) - {"source", "commit"})
    if unknown:
        raise InvalidArgument(f"unknown fields {', '.join(unknown)}; the body is {{source, commit}}")
    if not isinstance(source, str) or not source.strip():
        raise InvalidArgument("source must be the name of a registered source")
    if _sha(commit) is None:
        raise InvalidArgument(f"commit must be a commit id (7-64 hex digits), got {commit!r}")
    return source.strip(), str(commit)


# -- repository URLs --------------------------------------------------------------------------


def normalise_repo_url(url: str) -> str:
    """One spelling per repository: ``host/owner/repo`` for remote URLs (scheme, user,
    port, ``.git`` and case dropped), ``file:/abs/path`` for local ones.

    ``git@github.com:Org/Repo.git``, ``ssh://git@github.com:22/org/repo``,
    ``https://token@github.com/org/repo/`` all give ``github.com/org/repo``.
    """
    u = url.strip()
    if not u:
        return ""
    parts = urlsplit(u)
    if parts.scheme in ("http", "https", "ssh", "git", "git+ssh", "ssh+git") and parts.hostname:
        path = parts.path
        host = parts.hostname
    elif parts.scheme == "file":
        return "file:" + _clean_path(parts.path, lower=False)
    elif (m := SCP_LIKE.match(u)) and not u.startswith("/") and "\\" not in u:
        host, path = m.group("host"), m.group("path")
    else:
        return "file:" + _clean_path(u, lower=False)
    return f"{host.lower()}/{_clean_path(path, lower=True).lstrip('/')}"


def _clean_path(path: str, *, lower: bool) -> str:
    p = str(PurePosixPath(path.replace("\\", "/"))) if path else ""
    p = p.rstrip("/")
    if p.endswith(".git"):
        p = p[: -len(".git")]
    p = p.rstrip("/")
    return p.lower() if lower else p


def same_repository(a: str, b: str) -> bool:
    na, nb = normalise_repo_url(a), normalise_repo_url(b)
    return bool(na) and na == nb
