"""Managed git repositories: bare clones gitkb owns, read and written without a checkout.

A :class:`ManagedRepo` is a *bare* repository in a directory of the
workspace. Its remote is ``origin``; ``fetch(branch)`` updates
``refs/remotes/origin/<branch>``; proposal branches are local
``refs/heads/...`` built in memory (pygit2 trees and commits, no working
tree, no index file) and pushed with a lease through the git CLI.

Who writes what:

* objects, trees, commits, diffs: libgit2 (pygit2), in-process, no checkout;
* local branch moves: ``git update-ref <ref> <new> <old>`` (compare-and-swap, :mod:`gitkb.stores.git_refs`)
  with gitkb's writer token, so the guard hook lets them through;
* the network -- fetch, ls-remote, push -- the git CLI, with credentials
  from an askpass helper (:mod:`gitkb.stores.git_fetch`,
  :mod:`gitkb.stores.git_push`; why: see git_fetch). Pushes are always
  ``--force-with-lease``.

The guard (:mod:`gitkb.stores.git_guard`) installs hooks that refuse ref
updates and commits made by hand with the git CLI; gitkb's own CLI calls
carry the writer token. libgit2 never runs hooks, so the guard stops
accidents by people, not code; file ownership is the real protection.

Not thread-safe: use one ``ManagedRepo`` per thread (the single writer owns
the writing one).
"""

from __future__ import annotations

import shutil
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path

import pygit2

from gitkb.core.change_planning import ChangePlan, plan_changes
from gitkb.core.errors import Conflict, InvalidArgument, NotFound, StoreUnavailable
from gitkb.stores import git_fetch, git_guard, git_push
from gitkb.stores.git_auth import GitCredentials, check_url, redact_url
from gitkb.stores.git_cli import run_git
from gitkb.stores.git_commits import Person, write_commit
from gitkb.stores.git_refs import ZERO_SHA, check_branch, ref_sha, update_ref
from gitkb.stores.git_trees import (
    BLOB_MODES,
    TreeMap,
    build_tree,
    check_tree_path,
    clean_under,
    is_symlink_path,
    plan_edits,
    subtree,
    walk_tree,
)

_TREE_CACHE_SIZE = 8


class ManagedRepo:
    """A bare clone owned by gitkb. Create with :meth:`clone` or :meth:`open`."""

    def __init__(self, repo: pygit2.Repository, *, credentials: GitCredentials | None = None) -> None:
        self._repo = repo
        self.credentials = credentials
        self.path = Path(repo.path).resolve()
        self._tree_cache: OrderedDict[tuple[str, str], TreeMap] = OrderedDict()

    # ----------------------------------------------------------------- create / open

    @classmethod
    def clone(
        cls,
        url: str,
        path: str | Path,
        *,
        branch: str,
        credentials: GitCredentials | None = None,
        remote: str = "origin",
    ) -> ManagedRepo:
        """Create a bare repository at ``path``, add the remote, guard it, fetch ``branch``.

        ``url`` may be a local path, ``file://``, ``git://``, ``https://`` or
        ssh (``ssh://`` or ``user@host:path``). Tokens go in ``credentials``,
        never in the URL. On failure nothing is left at ``path``.
        """
        check_url(url)
        check_branch(branch)
        target = Path(path)
        if target.exists() and any(target.iterdir()):
            raise Conflict(f"cannot clone into {target}: the directory is not empty")
        local = Path(url).expanduser()
        if "://" not in url and local.exists():
            url = str(local.resolve())
        created = not target.exists()
        try:
            repo = pygit2.init_repository(str(target), bare=True)
            repo.remotes.create(remote, url)
            repo.config["gitkb.managed"] = "true"
            managed = cls(repo, credentials=credentials)
            managed.install_guard()
            managed.fetch(branch, remote=remote)
        except BaseException:
            if created:
                shutil.rmtree(target, ignore_errors=True)
            else:
                for child in target.iterdir():
                    shutil.rmtree(child) if child.is_dir() else child.unlink()
            raise
        return managed

    @classmethod
    def open(cls, path: str | Path, *, credentials: GitCredentials | None = None) -> ManagedRepo:
        try:
            repo = pygit2.Repository(str(path))
        except pygit2.GitError:
            raise NotFound(f"no managed git repository at {path}") from None
        if not repo.is_bare:
            raise InvalidArgument(f"{path} is not a bare repository; gitkb manages bare clones only")
        return cls(repo, credentials=credentials)

    @property
    def repository(self) -> pygit2.Repository:
        return self._repo

    def remote_url(self, remote: str = "origin") -> str:
        """The remote's URL as configured (tokens never are)."""
        return str(self._remote(remote).url)

    # ----------------------------------------------------------------- guard

    def install_guard(self) -> Path:
        """Install the hooks and a fresh writer token (see :mod:`gitkb.stores.git_guard`)."""
        return git_guard.install_guard(self.path)

    def writer_env(self) -> dict[str, str]:
        """Environment entries for gitkb's own git CLI calls in this repository."""
        return git_guard.writer_env(self.path)

    # ----------------------------------------------------------------- remote

    def fetch(self, branch: str, *, remote: str = "origin") -> str:
        """Fetch ``branch`` into ``refs/remotes/<remote>/<branch>``; return its commit sha.

        The remote may have been force-pushed: the tracking ref follows it.
        A branch missing on the remote raises ``NotFound`` (and a stale
        tracking ref is removed).
        """
        check_branch(branch)
        self._remote(remote)
        tracking = f"refs/remotes/{remote}/{branch}"
        try:
            git_fetch.fetch_branch(
                self.path, branch, remote=remote, credentials=self.credentials, where=self.remote_url(remote)
            )
        except NotFound:
            if ref_sha(self._repo, tracking) is not None:
                self._repo.references.delete(tracking)
            raise NotFound(f"branch {branch!r} not found on {redact_url(self.remote_url(remote))}") from None
        sha = ref_sha(self._repo, tracking)
        if sha is None:  # pragma: no cover - git reported success without writing the ref
            raise StoreUnavailable(f"fetch of {branch!r} did not update {tracking}")
        return sha

    def remote_head(self, branch: str, *, remote: str = "origin") -> str | None:
        """Ask the remote where ``branch`` is now (no objects fetched); None if it does not exist."""
        check_branch(branch)
        self._remote(remote)
        return git_fetch.ls_remote_branch(
            self.path, branch, remote=remote, credentials=self.credentials, where=self.remote_url(remote)
        )

    def tracking_head(self, branch: str, *, remote: str = "origin") -> str | None:
        """Where ``branch`` was on the remote at the last fetch or push."""
        return ref_sha(self._repo, f"refs/remotes/{remote}/{branch}")

    def push_with_lease(
        self, branch: str, expected_remote_sha: str | None, *, remote: str = "origin", sha: str | None = None
    ) -> str:
        """Push ``sha`` (default: the local branch head) to the remote's ``branch``, leased.

        ``expected_remote_sha`` is where the remote branch must still be
        (None: it must not exist). A moved remote raises ``Conflict`` and
        changes nothing. Returns the pushed sha.
        """
        check_branch(branch)
        if sha is None:
            sha = self.head(branch)
            if sha is None:
                raise NotFound(f"no local branch {branch!r} to push")
        return git_push.push_with_lease(
            self.path,
            branch,
            self.resolve(sha),
            expected_remote_sha,
            remote=remote,
            credentials=self.credentials,
            where=self.remote_url(remote),
        )

    # ----------------------------------------------------------------- reading

    def resolve(self, rev: str) -> str:
        """A commit sha for ``rev`` (sha, ref name, branch, ``origin/main``...)."""
        return str(self._commit(rev).id)

    def commit_by_id(self, hexsha: str) -> str | None:
        """The full id of the commit whose id is or starts with ``hexsha`` (hex digits only: no ref
        names, no revision expressions); None when no object or an ambiguous one has that id, or it
        is no commit."""
        try:
            obj = self._repo.get(hexsha)
        except (ValueError, pygit2.GitError):
            return None
        return str(obj.id) if isinstance(obj, pygit2.Commit) else None

    def head(self, branch: str) -> str | None:
        """The local branch ``refs/heads/<branch>``, or None."""
        check_branch(branch)
        return ref_sha(self._repo, f"refs/heads/{branch}")

    def tree_map(self, commit: str, under: str = "") -> TreeMap:
        """``path -> blob sha`` for every regular file (recursively) below ``under`` at ``commit``.

        Paths are relative to the repository root. Symlinks and submodules
        are left out and listed in ``.symlinks`` / ``.submodules``.
        """
        tree = self._commit(commit).tree
        key = (str(tree.id), clean_under(under))
        cached = self._tree_cache.get(key)
        if cached is None:
            cached = walk_tree(self._repo, tree, key[1])
            self._tree_cache[key] = cached
            if len(self._tree_cache) > _TREE_CACHE_SIZE:
                self._tree_cache.popitem(last=False)
        else:
            self._tree_cache.move_to_end(key)
        return TreeMap(cached, symlinks=cached.symlinks, submodules=cached.submodules, skipped=cached.skipped)

    def read_blob(self, commit: str, path: str) -> bytes:
        """The content of the regular file ``path`` at ``commit``."""
        check_tree_path(path)
        tree = self._commit(commit).tree
        if is_symlink_path(self._repo, tree, path):
            raise InvalidArgument(f"{path!r} is or goes through a symlink; gitkb does not follow symlinks")
        try:
            entry = tree[path]
        except KeyError:
            raise NotFound(f"{path!r} does not exist at {str(self._commit(commit).id)[:12]}") from None
        if entry.filemode not in BLOB_MODES:
            raise InvalidArgument(f"{path!r} is not a regular file")
        return self.read_blob_sha(str(entry.id))

    def read_blob_sha(self, blob_sha: str) -> bytes:
        """The content of a blob by its sha (as found in a tree map)."""
        try:
            obj = self._repo[blob_sha]
        except (KeyError, ValueError):
            raise NotFound(f"blob {blob_sha} not found") from None
        if not isinstance(obj, pygit2.Blob):
            raise InvalidArgument(f"{blob_sha} is not a blob")
        return bytes(obj.data)

    def is_symlink_path(self, commit: str, path: str) -> bool:
        """True when ``path`` or any folder above it is a symlink entry at ``commit``."""
        return is_symlink_path(self._repo, self._commit(commit).tree, path)

    def is_ancestor(self, a: str, b: str) -> bool:
        """True when commit ``a`` is ``b`` or an ancestor of it; False when ``a`` is unknown here."""
        target = self._commit(b).id
        try:
            source = self._commit(a).id
        except NotFound:
            return False
        return bool(source == target or self._repo.descendant_of(target, source))

    def diff_names(self, a: str | None, b: str, under: str = "") -> ChangePlan:
        """The :class:`ChangePlan` from commit ``a`` (None: nothing) to ``b``, limited to ``under``.

        Works on trees, not history, so unrelated or force-pushed commits
        compare fine. Same result as ``plan_changes(tree_map(a), tree_map(b))``,
        computed from the tree diff (identical folders are skipped).
        """
        under = clean_under(under)
        new_tree = self._commit(b).tree
        if a is None:
            return plan_changes({}, self.tree_map(b, under))
        old_tree = self._commit(a).tree
        prefix = f"{under}/" if under else ""
        old_part: dict[str, str] = {}
        new_part: dict[str, str] = {}
        for delta in old_tree.diff_to_tree(new_tree).deltas:
            for side, part in ((delta.old_file, old_part), (delta.new_file, new_part)):
                if side.mode in BLOB_MODES and side.path.startswith(prefix):
                    part[side.path] = str(side.id)
        return plan_changes(old_part, new_part)

    def unified_diff(self, a: str | None, b: str, *, context_lines: int = 3) -> str:
        """A unified diff (``git diff`` format, renames detected) from ``a`` (None: nothing) to ``b``."""
        new_tree = self._commit(b).tree
        old_tree = self._commit(a).tree if a is not None else subtree(self._repo, self._empty_tree())
        diff = old_tree.diff_to_tree(new_tree, context_lines=context_lines)
        diff.find_similar()
        return diff.patch or ""

    # ----------------------------------------------------------------- writing

    def commit_changes(
        self,
        branch: str,
        base: str,
        changes: Mapping[str, bytes | None],
        *,
        renames: Mapping[str, str] | None = None,
        message: str,
        author: Person,
        committer: Person | None = None,
    ) -> str:
        """Commit ``changes`` (path -> bytes, or None to delete) and ``renames`` (old -> new) on ``base``.

        Builds the tree in memory from ``base``'s tree, touching only the
        folders on the changed paths, writes one commit whose parent is
        ``base``, and moves ``refs/heads/<branch>`` to it. The branch must
        not exist yet or must point at ``base`` (stacking proposals);
        otherwise ``Conflict`` (use :meth:`reset_branch` to rebuild a
        branch). A change that leaves the tree as it was raises
        ``InvalidArgument``. On any error the branch is left as it was.
        """
        check_branch(branch)
        renames = dict(renames or {})
        if not changes and not renames:
            raise InvalidArgument("nothing to commit: no changes and no renames")
        base_commit = self._commit(base)
        current = self.head(branch)
        if current is not None and current != str(base_commit.id):
            raise Conflict(
                f"branch {branch!r} is at {current[:12]}, not at the base {str(base_commit.id)[:12]}",
                details={"branch": branch, "head": current},
            )
        edits = plan_edits(self._repo, base_commit.tree, changes, renames)
        tree_id = build_tree(self._repo, base_commit.tree, edits) or self._empty_tree()
        if tree_id == base_commit.tree.id:
            raise InvalidArgument("the change leaves every file as it is; nothing to commit")
        commit_id = write_commit(self._repo, tree_id, [base_commit.id], message, author, committer)
        update_ref(self.path, f"refs/heads/{branch}", str(commit_id), current or ZERO_SHA, "gitkb: commit")
        return str(commit_id)

    def reset_branch(self, branch: str, sha: str, *, expected: str | None = None) -> None:
        """Point ``refs/heads/<branch>`` at ``sha`` (created if missing). ``expected``: compare-and-swap."""
        check_branch(branch)
        target = self.resolve(sha)
        update_ref(self.path, f"refs/heads/{branch}", target, expected, "gitkb: reset")

    def delete_branch(self, branch: str, *, expected: str | None = None) -> bool:
        """Delete the local branch; False if it did not exist."""
        check_branch(branch)
        ref = f"refs/heads/{branch}"
        if ref_sha(self._repo, ref) is None:
            return False
        args = ["update-ref", "-m", "gitkb: delete", "-d", ref, *([expected] if expected else [])]
        run_git(self.path, args, env=self.writer_env(), error=Conflict)
        return True

    # ----------------------------------------------------------------- internals

    def _commit(self, rev: str) -> pygit2.Commit:
        if not isinstance(rev, str) or not rev or rev.startswith("-"):
            raise InvalidArgument(f"invalid revision {rev!r}")
        try:
            obj = self._repo.revparse_single(rev)
            return obj.peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
            raise NotFound(f"commit {rev!r} not found in the managed repository") from None

    def _remote(self, name: str) -> pygit2.Remote:
        try:
            return self._repo.remotes[name]
        except KeyError:
            raise NotFound(f"remote {name!r} is not configured") from None

    def _empty_tree(self) -> pygit2.Oid:
        oid: pygit2.Oid = self._repo.TreeBuilder().write()
        return oid
