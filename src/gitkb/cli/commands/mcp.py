"""gitkb mcp [--transport stdio|http] [--agent AGENT_ID] [--host 127.0.0.1 --port N]

Over stdio the server is a process of the operator's, with the CLI's rights (any path it can
read, no caps). Over HTTP whoever reaches the port is served as the HTTP API serves: the
``[server]`` caps and ``allowed_roots`` for a server-side path (``gitkb.http.limits.guarded``)."""

from __future__ import annotations

import sys

import click

from gitkb.cli.runner import CliState
from gitkb.core.errors import GitkbError

LOOPBACK = ("127.0.0.1", "localhost", "::1")


@click.command("mcp")
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True)
@click.option("--agent", "agent_id", help="Serve as this agent: only the indexes of its knowledge bases.")
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP only.")
@click.option("--port", type=int, default=8781, show_default=True, help="HTTP only.")
@click.option(
    "--allow-remote", is_flag=True, help="HTTP only: allow a non-loopback host (no auth: use a proxy)."
)
@click.pass_obj
def mcp(
    state: CliState, transport: str, agent_id: str | None, host: str, port: int, allow_remote: bool
) -> None:
    """Run the MCP server for agents (stdio, or streamable HTTP at http://HOST:PORT/mcp)."""
    if transport == "http" and host not in LOOPBACK and not allow_remote:
        raise click.UsageError(
            f"refusing to serve MCP without auth on {host}; use a loopback host or --allow-remote"
        )
    import anyio  # serving only: anyio (~12 ms) stays off every CLI start

    from gitkb.http.config import load_server_config  # heavy: fastapi, for the Host allowlist
    from gitkb.mcp.server import build_server, serve_http, serve_stdio  # heavy: mcp

    try:
        ws = state.workspace()
        ws.ctx.keep_chunk_worker = True  # long-running, unlike the other commands: keep the chunking worker
        cfg = load_server_config(ws.settings)  # [server] public_host / allowed_hosts, as gitkb serve
        # over HTTP, the [server] limits hold as on the HTTP API (max_top_n, max_count, allowed_roots)
        server = build_server(ws, agent_id, limits=cfg if transport == "http" else None)
    except GitkbError as exc:
        click.echo(f"error: {exc.message}", err=True)
        sys.exit(1)
    if agent_id is not None:
        shown = ws.agent_show(agent_id)
        if not shown.get("Success") or not shown.get("Indexes"):
            click.echo(
                f"warning: agent {agent_id!r} has no indexes bound; search_index is not offered"
                " (gitkb agent assign AGENT_ID KB...)",
                err=True,
            )
    if transport == "stdio":
        anyio.run(serve_stdio, server)
    else:
        click.echo(f"gitkb MCP (streamable HTTP) on http://{host}:{port}/mcp", err=True)
        serve_http(server, cfg, host=host, port=port)


def register(group: click.Group) -> None:
    group.add_command(mcp)
