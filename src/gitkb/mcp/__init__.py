"""gitkb's MCP server: tools for agents over one Workspace (``build_server``), stdio and streamable HTTP."""

from __future__ import annotations

from gitkb.mcp.server import build_server, serve_http, serve_stdio

__all__ = ["build_server", "serve_http", "serve_stdio"]
