"""The ``local`` forge: change requests kept in gitkb's catalog, for any git remote.

The embedded default, so the whole change flow runs on a machine with no
network: the remote is any git URL (a bare repository on disk in tests and
the quick start); a change request is a catalog row (``change_requests``)
numbered from 1 per repository. When the remote is a repository on this
machine (a path or ``file://``), :meth:`LocalForge.merge` merges a change
request into its base branch with a real two-parent merge commit
(:func:`gitkb.stores.git_merge.merge_into`), and :meth:`changed_files` reads
the diff from the remote itself.

Configuration: ``ForgeConfig(kind="local", repo=<remote url>,
options={"catalog": <gitkb.stores.catalog.Catalog>})``.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

import pygit2

from gitkb.core.change_planning import changed_files, plan_changes
from gitkb.core.errors import Conflict, ForgeError, InvalidArgument, NotFound
from gitkb.stores.catalog import change_requests as cr_rows
from gitkb.stores.catalog.change_requests import ChangeRequestRow
from gitkb.stores.git_merge import merge_into
from gitkb.stores.git_trees import walk_tree

from .base import ChangeRequest, ChangeState, ForgeConfig
from .failures import ALREADY_EXISTS, NOT_FOUND, VALIDATION, forge_error


def local_path(url: str) -> Path | None:
    """The filesystem path of a remote on this machine, or None (ssh, https, git://)."""
    if url.startswith("file://"):
        return Path(unquote(urlsplit(url).path))
    if "://" in url:
        return None
    if ":" in url.split("/", 1)[0]:  # scp-like user@host:path
        return None
    return Path(url).expanduser()


class LocalForge:
    """Change requests of one repository, in the catalog."""

    name = "local"

    def __init__(self, config: ForgeConfig) -> None:
        catalog = config.options.get("catalog")
        if catalog is None:
            raise InvalidArgument(
                "the local forge needs the workspace catalog (ForgeConfig.options['catalog'])"
            )
        self._catalog = catalog
        self.repo = config.repo
        self.remote_path = local_path(config.repo)

    # -- the Forge protocol -------------------------------------------------------------

    def find_open_by_head(self, head: str) -> ChangeRequest | None:
        row = cr_rows.find_open_by_head(self._catalog.conn, self.repo, head)
        return self._cr(row) if row else None

    def create(self, *, head: str, base: str, title: str, body: str) -> ChangeRequest:
        if not title.strip():
            raise forge_error(self.name, VALIDATION, "local: a change request needs a title")
        if self.remote_path is not None:
            repo = self._remote()
            for branch in (head, base):
                if _ref(repo, branch) is None:
                    raise forge_error(
                        self.name, VALIDATION, f"local: branch {branch!r} does not exist on the remote"
                    )
        with self._catalog.write() as conn:
            if cr_rows.find_open_by_head(conn, self.repo, head) is not None:
                raise forge_error(
                    self.name, ALREADY_EXISTS, f"local: a change request for {head!r} is already open"
                )
            row = cr_rows.create(conn, self.repo, head=head, base=base, title=title, body=body)
        return self._cr(row)

    def update(self, number: int, *, title: str, body: str) -> ChangeRequest:
        with self._catalog.write() as conn:
            self._row(number)
            cr_rows.update_text(conn, self.repo, number, title=title, body=body)
        return self.get(number)

    def get(self, number: int) -> ChangeRequest:
        return self._cr(self._row(number))

    def changed_files(self, number: int) -> list[dict[str, str]]:
        row = self._row(number)
        repo = self._remote()
        if row.state == "open":
            head, base = _ref(repo, row.head), _ref(repo, row.base)
            if head is None or base is None:
                raise forge_error(
                    self.name, NOT_FOUND, f"local: a branch of change request #{number} is gone"
                )
            start = repo.merge_base(base.id, head.id)
        else:
            if not row.head_sha or not row.base_sha:
                return []
            head = repo[row.head_sha].peel(pygit2.Commit)
            start = repo.merge_base(pygit2.Oid(hex=row.base_sha), head.id)
        old = walk_tree(repo, repo[start].peel(pygit2.Commit).tree) if start is not None else {}
        new = walk_tree(repo, head.tree)
        return [{k: str(v) for k, v in f.items()} for f in changed_files(plan_changes(old, new))]

    # -- beyond the protocol: what the embedded forge's "buttons" do --------------------

    def list(self, *, state: str | None = None) -> list[ChangeRequest]:
        return [self._cr(r) for r in cr_rows.list_for_repo(self._catalog.conn, self.repo, state=state)]

    def merge(self, number: int, *, message: str | None = None) -> ChangeRequest:
        """Merge the change request into its base (a merge commit on the remote) and mark it merged."""
        row = self._row(number)
        if row.state != "open":
            raise Conflict(f"change request #{number} is {row.state}; only an open one can be merged")
        repo = self._remote()
        head, base = _ref(repo, row.head), _ref(repo, row.base)
        if head is None or base is None:
            raise NotFound(f"a branch of change request #{number} no longer exists on the remote")
        msg = message or f"Merge change request #{number} from {row.head}\n\n{row.title}"
        merge_sha = merge_into(self._remote_path(), row.head, row.base, msg)
        with self._catalog.write() as conn:
            cr_rows.mark(
                conn,
                self.repo,
                number,
                "merged",
                merge_commit_sha=merge_sha,
                base_sha=str(base.id),
                head_sha=str(head.id),
            )
        return self.get(number)

    def close(self, number: int) -> ChangeRequest:
        """Close without merging."""
        row = self._row(number)
        if row.state != "open":
            raise Conflict(f"change request #{number} is already {row.state}")
        head_sha = base_sha = None
        if self.remote_path is not None:
            repo = self._remote()
            h, b = _ref(repo, row.head), _ref(repo, row.base)
            head_sha, base_sha = (str(h.id) if h else None), (str(b.id) if b else None)
        with self._catalog.write() as conn:
            cr_rows.mark(conn, self.repo, number, "closed", base_sha=base_sha, head_sha=head_sha)
        return self.get(number)

    # -- plumbing -----------------------------------------------------------------------

    def _row(self, number: int) -> ChangeRequestRow:
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            raise InvalidArgument(f"a change request number is a positive integer, got {number!r}")
        row = cr_rows.get(self._catalog.conn, self.repo, number)
        if row is None:
            raise forge_error(self.name, NOT_FOUND, f"local: no change request #{number}")
        return row

    def _remote_path(self) -> Path:
        if self.remote_path is None:
            raise InvalidArgument(
                "the local forge reads and merges only remotes on this machine (a path or file:// URL); "
                "this remote is reached over the network, so merge on its own forge"
            )
        return self.remote_path

    def _remote(self) -> pygit2.Repository:
        try:
            return pygit2.Repository(str(self._remote_path()))
        except pygit2.GitError:
            raise ForgeError(
                f"local: no git repository at {self.remote_path}",
                details={"forge": self.name, "kind": NOT_FOUND},
            ) from None

    def _cr(self, row: ChangeRequestRow) -> ChangeRequest:
        state: ChangeState = (
            "merged" if row.state == "merged" else ("closed" if row.state == "closed" else "open")
        )
        return ChangeRequest(
            number=row.number,
            url=f"gitkb+local:{self.repo}#change-request-{row.number}",
            state=state,
            head=row.head,
            base=row.base,
            title=row.title,
            merged=row.merged,
            merge_commit_sha=row.merge_commit_sha,
        )


def _ref(repo: pygit2.Repository, branch: str) -> pygit2.Commit | None:
    try:
        return repo.lookup_reference(f"refs/heads/{branch}").peel(pygit2.Commit)
    except (KeyError, pygit2.InvalidSpecError):
        return None


def create(config: ForgeConfig) -> LocalForge:
    return LocalForge(config)
