"""gitkb source add|list|sync|remove"""

from __future__ import annotations

from typing import Any

import click

from gitkb.cli.commands.embeddings import vectors_line
from gitkb.cli.confirm import confirmed, counted, yes_option
from gitkb.cli.output import table
from gitkb.cli.paging import page_options, with_more
from gitkb.cli.progress import Bar
from gitkb.cli.runner import run


@click.group("source")
def source_group() -> None:
    """Git repositories that feed indexes (synced, never written by hand)."""


@source_group.command("add")
@click.argument("name")
@click.argument("url")
@click.option("--branch", default="main", show_default=True, help="Branch to index and propose against.")
@click.option("--documents-root", default="docs", show_default=True, help="Folder holding the documents.")
@click.option("--index", "indexes", multiple=True, help="Index to feed (repeatable; created when missing).")
@click.option("--include", multiple=True, help="Glob of files to index, relative to the documents root.")
@click.option("--exclude", multiple=True, help="Glob of files to leave out (repeatable).")
@click.option(
    "--forge", "forge_kind", type=click.Choice(["local", "github", "gitlab"]), help="Where PRs/MRs go."
)
@click.option("--forge-repo", help="GitHub owner/name or GitLab project path.")
@click.option("--forge-api-url", help="API root (GitHub Enterprise, self-hosted GitLab).")
@click.option("--credential", help="A [[credentials]] entry of gitkb.toml (sent only to its hosts).")
@click.option(
    "--forge-credential", help="Another [[credentials]] entry for the forge API (default --credential)."
)
# Refused with the library's message (secrets are named in [[credentials]], never by a caller):
@click.option("--forge-token-env", hidden=True)
@click.option("--forge-app-id", hidden=True)
@click.option("--forge-app-key-env", hidden=True)
@click.option("--token-env", hidden=True)
@click.option("--secrets-file", hidden=True)
@click.option("--secrets-key", hidden=True)
@click.option("--ssh-key", hidden=True)
@click.option("--webhook-secret", help="Secret the forge signs webhooks with (else GITKB_WEBHOOK_SECRET).")
def add(
    name: str,
    url: str,
    branch: str,
    documents_root: str,
    indexes: tuple[str, ...],
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    forge_kind: str | None,
    forge_repo: str | None,
    forge_api_url: str | None,
    credential: str | None,
    forge_credential: str | None,
    forge_token_env: str | None,
    forge_app_id: str | None,
    forge_app_key_env: str | None,
    token_env: str | None,
    secrets_file: str | None,
    secrets_key: str | None,
    ssh_key: str | None,
    webhook_secret: str | None,
) -> None:
    """Register the git repository URL as source NAME and clone it."""
    forge = {
        "kind": forge_kind,
        "repo": forge_repo,
        "api_url": forge_api_url,
        "credential": forge_credential,
        "token_env": forge_token_env,
        "app_id": forge_app_id,
        "app_key_env": forge_app_key_env,
    }
    auth = {
        "token_env": token_env,
        "secrets_file": secrets_file,
        "secrets_key": secrets_key,
        "ssh_key": ssh_key,
    }
    run(
        lambda ws: ws.source_add(
            name,
            url,
            branch=branch,
            documents_root=documents_root,
            index=list(indexes) or None,
            include=list(include),
            exclude=list(exclude),
            forge={k: v for k, v in forge.items() if v} or None,
            auth={k: v for k, v in auth.items() if v} or None,
            webhook_secret=webhook_secret,
            credential=credential,
        )
    )


def _render_list(data: dict[str, Any]) -> None:
    rows = [
        (
            s["name"],
            s["url"],
            s["branch"],
            s["documents_root"],
            ",".join(s["indexes"]),
            (s["synced_commit"] or "never")[:12],
            s["forge"].get("kind"),
        )
        for s in data.get("Sources", [])
    ]
    if not rows:
        click.echo("No sources yet. Add one with: gitkb source add NAME URL")
        return
    click.echo(table(rows, ["name", "url", "branch", "root", "indexes", "synced", "forge"]))


@source_group.command("list")
@page_options
def list_(start: int | None, count: int | None) -> None:
    """List sources (credentials are shown by reference, never by value), a page at a time."""
    run(lambda ws: ws.source_list(start=start, count=count), with_more(_render_list))


def _render_sync(data: dict[str, Any]) -> None:
    click.echo(data.get("Message", ""))
    for s in data.get("skipped", [])[:20]:
        click.echo(f"  skipped {s['path']}: {s['category']} ({s['detail']})")
    if data.get("status") == "synced":
        click.echo(
            f"  chunks added {data.get('chunks_added')}, removed {data.get('chunks_removed')}; "
            f"{data.get('took_ms')} ms"
        )

    if vectors_line(data):
        click.echo(vectors_line(data))


@source_group.command("sync")
@click.argument("name")
@click.option("--commit", help="Sync to this commit instead of the branch head.")
@click.option("--full", is_flag=True, help="Compare every file, not only what changed since the last sync.")
def sync(name: str, commit: str | None, full: bool) -> None:
    """Fetch source NAME and re-index only what changed (vectors follow in the background)."""

    def call(ws: Any) -> dict[str, Any]:
        with Bar("syncing") as bar:
            return ws.source_sync(name, commit=commit, full=full, progress=bar)  # type: ignore[no-any-return]

    run(call, _render_sync)


@source_group.command("rollback")
@click.argument("name")
@click.argument("commit")
def rollback(name: str, commit: str) -> None:
    """Admin: move source NAME's indexes back to COMMIT, an older commit of its tracked branch."""

    def call(ws: Any) -> dict[str, Any]:
        with Bar("rolling back") as bar:
            return ws.source_rollback(name, commit, progress=bar)  # type: ignore[no-any-return]

    run(call, _render_sync)


def _find(ws: Any, name: str) -> dict[str, Any] | None:
    start: int | None = 0
    while start is not None:
        page = ws.source_list(start=start, count=500)
        for s in page.get("Sources") or []:
            if name in (s.get("name"), s.get("source_id")):
                return s  # type: ignore[no-any-return]
        start = page.get("next_start") if page.get("has_more") else None
    return None


def _what_goes(ws: Any, name: str, keep_documents: bool) -> tuple[str, list[str]] | None:
    """What removing source NAME deletes (None when there is no such source)."""
    s = _find(ws, name)
    if s is None:
        return None
    goes = [f"its clone of {s['url']} ({s['branch']}), its proposals and reviews"]
    if keep_documents:
        goes.append(f"not its documents: they stay in {', '.join(s['indexes']) or 'its indexes'}")
    else:
        details = ws.document_index("LIST_INDICES").get("IndexDetails") or {}
        for ix in s["indexes"]:
            d = details.get(ix) or {}
            goes.append(
                f"its documents in index {ix!r}: up to {counted(d.get('file_count'), 'document(s)')}, "
                f"{counted(d.get('chunk_count'), 'chunk(s)')} and their vectors"
            )
    return f"source {s['name']!r}", goes


@source_group.command("remove")
@click.argument("name")
@click.option("--keep-documents", is_flag=True, help="Leave the synced documents in the indexes.")
@yes_option
def remove(name: str, keep_documents: bool, yes: bool) -> None:
    """Forget source NAME: its clone, proposals, reviews and (by default) its documents (asks first)."""
    what = f"source {name!r}: its clone" + (
        "" if keep_documents else " and its documents, chunks and vectors"
    )
    act = lambda ws: ws.source_remove(name, keep_documents=keep_documents)  # noqa: E731
    run(confirmed(yes, what, lambda ws: _what_goes(ws, name, keep_documents), act))


def register(group: click.Group) -> None:
    group.add_command(source_group)
