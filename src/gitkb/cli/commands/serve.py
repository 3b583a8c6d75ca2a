"""gitkb serve [--host 127.0.0.1] [--port 8780] [--log-format text|json]: the HTTP API (uvicorn).

``--log-format json`` writes one JSON object per line on stderr (``gitkb.http.logs``): time,
level, logger, message, request id; the access line adds method, route, status, duration and
principal. Every response carries its ``X-Request-Id``.

With no API token configured the server only listens on loopback. The server
that holds the workspace's writer lease records its URL in ``<home>/server.json``.
"""

from __future__ import annotations

import logging
import socket
import sys
from typing import Any

import click

from gitkb.cli.runner import CliState
from gitkb.core.config import load_settings
from gitkb.core.errors import GitkbError


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", default=8780, show_default=True, type=click.IntRange(0, 65535), help="0: any free port."
)
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
)
@click.option(
    "--log-format",
    default="text",
    show_default=True,
    type=click.Choice(["text", "json"]),
    help="json: one JSON object per line on stderr, for a log pipeline.",
)
@click.pass_obj
def serve(state: CliState, host: str, port: int, log_level: str, log_format: str) -> None:
    """Serve the HTTP API (OpenAPI at /openapi.json, docs at /docs)."""
    import uvicorn  # heavy: uvicorn

    from gitkb.http.app import create_app  # heavy: fastapi
    from gitkb.http.auth import check_bind  # heavy: fastapi
    from gitkb.http.config import load_server_config  # heavy: fastapi
    from gitkb.http.discovery import advertised_url  # heavy: fastapi

    try:
        settings = load_settings(state.resolve_home())
        cfg = load_server_config(settings)
        check_bind(host, cfg)
    except GitkbError as exc:
        click.echo(f"error: {exc.message}", err=True)
        for step in exc.next_steps:
            click.echo(f"  next: {step}", err=True)
        sys.exit(1)
    try:
        sock = _bind(host, port)
    except OSError as exc:
        click.echo(f"error: cannot listen on {host}:{port}: {exc.strerror or exc}", err=True)
        sys.exit(1)
    bound_port = sock.getsockname()[1]
    url = advertised_url(host, bound_port)
    app = create_app(settings, server=cfg, advertise=url)
    started = f"gitkb serving {settings.home} on {url} (docs at {url}/docs)"
    logging_kw: dict[str, Any] = {}
    if log_format == "json":
        from gitkb.http.logs import use_json_logs, uvicorn_log_config  # only with --log-format json

        use_json_logs(log_level)
        logging_kw = {"log_config": uvicorn_log_config(log_level), "access_log": False}
        logging.getLogger("gitkb.http").info(started)
    else:
        click.echo(started, err=True)
    config = uvicorn.Config(
        app,
        **logging_kw,
        log_level=log_level,
        timeout_graceful_shutdown=10,
        proxy_headers=False,
        server_header=False,
    )
    uvicorn.Server(config).run(sockets=[sock])


def register(group: click.Group) -> None:
    group.add_command(serve)
