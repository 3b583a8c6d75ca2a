"""Authors and commit objects written in memory."""

from __future__ import annotations

import pygit2

from gitkb.core.errors import InvalidArgument

Person = tuple[str, str] | pygit2.Signature  # (name, email) or a ready signature


def signature(person: Person) -> pygit2.Signature:
    if isinstance(person, pygit2.Signature):
        return person
    try:
        name, email = person
    except (TypeError, ValueError):
        raise InvalidArgument("an author is a (name, email) pair") from None
    if not name or not email or any(c in f"{name}{email}" for c in "<>\n\x00"):
        raise InvalidArgument(f"invalid author {name!r} <{email!r}>")
    return pygit2.Signature(name, email)


def write_commit(
    repo: pygit2.Repository,
    tree: pygit2.Oid,
    parents: list[pygit2.Oid],
    message: str,
    author: Person,
    committer: Person | None = None,
) -> pygit2.Oid:
    """Write a commit object (no ref moves). Messages get a trailing newline."""
    if not message or not message.strip():
        raise InvalidArgument("a commit needs a message")
    if not message.endswith("\n"):
        message += "\n"
    a = signature(author)
    c = signature(committer) if committer is not None else a
    oid: pygit2.Oid = repo.create_commit(None, a, c, message, tree, parents)
    return oid
