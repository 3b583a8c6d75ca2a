"""The narrow forge protocol every forge (GitHub, GitLab, local) implements.

A forge knows five things about change requests (PRs, MRs, local change
requests) on one repository: find the open one for a head branch, create one,
update its title and body, get its state, and list its changed files.
:func:`open_or_update` is the one flow the proposal service needs on top.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from gitkb.core.errors import ForgeError, InvalidArgument

from .failures import ALREADY_EXISTS
from .secrets import Secret

ChangeState = Literal["open", "closed", "merged"]
FileStatus = Literal["A", "M", "D", "R"]


@dataclass(frozen=True)
class ChangeRequest:
    """One PR / MR / local change request, as gitkb needs to see it."""

    number: int  # GitHub PR number, GitLab MR iid, local number
    url: str  # the page a human opens (html_url / web_url)
    state: ChangeState
    head: str  # source branch name (no owner prefix)
    base: str  # target branch name
    title: str
    merged: bool = False
    merge_commit_sha: str | None = None


@dataclass(frozen=True)
class ForgeConfig:
    """What a forge factory gets. Secrets are :class:`Secret` (never printed).

    - ``kind``: registry key (``github``, ``gitlab``, ``local``, ...).
    - ``repo``: ``owner/name`` on GitHub; the project path
      (``group/subgroup/project``) or numeric id on GitLab; the forge's own
      notion for others.
    - ``api_url``: GitHub's REST root (default ``https://api.github.com``; GitHub
      Enterprise Server: ``https://HOST/api/v3``); GitLab's instance URL
      (default ``https://gitlab.com``; ``/api/v4`` is added by the client).
    - ``token``: GitHub token or GitLab (personal/project/group) access token.
    - ``app_id`` / ``app_private_key`` / ``installation_id``: GitHub App
      authentication instead of a token (installation id found from the repo
      when not given).
    - ``timeout``: seconds per HTTP request.
    - ``options``: kind-specific settings (the local forge's catalog handle,
      say); the GitHub and GitLab forges read none.
    """

    kind: str
    repo: str
    api_url: str | None = None
    token: Secret | None = None
    app_id: int | str | None = None
    app_private_key: Secret | None = None
    installation_id: int | None = None
    timeout: float = 10.0
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("token", "app_private_key"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Secret):
                raise InvalidArgument(f"ForgeConfig.{name} must be a Secret (see gitkb.forges.load_secret)")
        if not self.repo or not isinstance(self.repo, str):
            raise InvalidArgument("ForgeConfig.repo is required")

    def secrets(self) -> tuple[Secret, ...]:
        return tuple(s for s in (self.token, self.app_private_key) if s is not None)


@runtime_checkable
class Forge(Protocol):
    """What the proposal service may ask of a forge.

    Every method raises :class:`gitkb.core.errors.ForgeError` (never a library
    exception) with ``details["kind"]`` one of the kinds in
    :mod:`gitkb.forges.failures`, and ``details["forge"]`` the forge's name.
    """

    name: str

    def find_open_by_head(self, head: str) -> ChangeRequest | None: ...

    def create(self, *, head: str, base: str, title: str, body: str) -> ChangeRequest: ...

    def update(self, number: int, *, title: str, body: str) -> ChangeRequest: ...

    def get(self, number: int) -> ChangeRequest: ...

    def changed_files(self, number: int) -> list[dict[str, str]]:
        """``[{"path", "status": A|M|D|R, "old_path"?}]`` of the change request."""
        ...


def changed_file(path: str, status: FileStatus, old_path: str | None = None) -> dict[str, str]:
    out = {"path": path, "status": status}
    if status == "R" and old_path:
        out["old_path"] = old_path
    return out


def open_or_update(
    forge: Forge, *, head: str, base: str, title: str, body: str
) -> tuple[ChangeRequest, bool]:
    """Open a change request for ``head`` into ``base``, or update the open one.

    Lists by head first; when creating races with someone else's create (the
    forge answers "already exists": GitHub 422, GitLab 409) it lists again and
    updates. Returns ``(change_request, created)``.
    """
    existing = forge.find_open_by_head(head)
    if existing is not None:
        return forge.update(existing.number, title=title, body=body), False
    try:
        return forge.create(head=head, base=base, title=title, body=body), True
    except ForgeError as exc:
        if exc.details.get("kind") != ALREADY_EXISTS:
            raise
        existing = forge.find_open_by_head(head)
        if existing is None:
            raise ForgeError(
                f"{forge.name}: a change request for branch {head!r} already exists, "
                "but none is open for it; it may be closed or from another repository",
                details={**exc.details},
                next_steps=["reopen or delete the existing change request, then try again"],
            ) from None
        return forge.update(existing.number, title=title, body=body), False
