"""What one pending agent tool call touches: the pure half of ``gitkb guard``.

:func:`classify` takes a hook's JSON -- Claude Code's PreToolUse input (``tool_name``,
``tool_input``, ``cwd``) or the plain ``{"tool", "path", "command", "cwd"}`` form -- and returns
the paths the call would read, write, or do something unknown to (:class:`~gitkb.core.touches.Touch`).
File tools touch their path as their name says (``Write`` writes, ``Read`` reads; an unknown tool
touches every path-like argument as ``unknown``); a shell command is classified conservatively by
:mod:`gitkb.core.shell_touches` (split by :mod:`gitkb.core.shell_words`, ``git`` by
:mod:`gitkb.core.git_touches`).

The guard (``gitkb.services.changes.checkout_guard``) resolves the paths (symlinks, ``..``) and denies a
``write`` or ``unknown`` touch inside a managed checkout. No I/O here.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gitkb.core.shell_touches import shell_touches
from gitkb.core.touches import READ, UNKNOWN, WRITE, Touch, join_cwd


@dataclass(frozen=True)
class ToolCall:
    runtime: str  # "claude" (PreToolUse input) or "plain"
    tool: str
    cwd: str
    touches: tuple[Touch, ...] = field(default_factory=tuple)


# -- file tools ---------------------------------------------------------------

CLAUDE_WRITE_TOOLS = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
CLAUDE_READ_TOOLS = {
    "Read": "file_path",
    "NotebookRead": "notebook_path",
    "Grep": "path",
    "Glob": "path",
    "LS": "path",
}
CLAUDE_NO_FILES = {
    "WebFetch",
    "WebSearch",
    "TodoWrite",
    "TodoRead",
    "Task",
    "Agent",
    "ExitPlanMode",
    "AskUserQuestion",
    "BashOutput",
    "KillShell",
    "KillBash",
    "Skill",
    "SlashCommand",
    "ListMcpResourcesTool",
    "ReadMcpResourceTool",
}
SHELL_TOOLS = {
    "bash",
    "shell",
    "sh",
    "exec",
    "run",
    "command",
    "terminal",
    "run_shell_command",
    "local_shell",
}
PLAIN_READ = {
    "read",
    "view",
    "cat",
    "grep",
    "glob",
    "ls",
    "list",
    "search",
    "find",
    "open",
    "read_file",
    "list_dir",
}
PLAIN_WRITE = {
    "write",
    "edit",
    "create",
    "delete",
    "remove",
    "rm",
    "unlink",
    "move",
    "mv",
    "rename",
    "patch",
    "apply_patch",
    "multiedit",
    "append",
    "mkdir",
    "touch",
    "chmod",
    "copy",
    "cp",
    "write_file",
    "edit_file",
    "replace",
    "str_replace",
    "insert",
    "notebookedit",
}
PATH_KEYS = re.compile(r"path|file|dir|folder|cwd|target|dest|source|from|to$", re.IGNORECASE)


def classify(data: Mapping[str, Any], *, default_cwd: str, env: Mapping[str, str] | None = None) -> ToolCall:
    """The touches of one hook input; ``ValueError`` when it is neither form."""
    env = env or {}
    if not isinstance(data, Mapping):
        raise ValueError("the hook input must be a JSON object")
    given_cwd = data.get("cwd")
    cwd: str = given_cwd if isinstance(given_cwd, str) and given_cwd else default_cwd
    if "tool_name" in data:
        name, args = data.get("tool_name"), data.get("tool_input")
        if not isinstance(name, str) or not isinstance(args, Mapping):
            raise ValueError("tool_name must be a string and tool_input an object")
        return ToolCall("claude", name, cwd, tuple(_claude(name, args, cwd, env)))
    if "tool" in data or "command" in data:
        tool = data.get("tool")
        plain: str = tool if isinstance(tool, str) else "shell"
        return ToolCall("plain", plain, cwd, tuple(_plain(plain, data, cwd, env)))
    raise ValueError(
        "expected Claude Code's PreToolUse input (tool_name, tool_input) or {tool, path, command}"
    )


def _claude(name: str, args: Mapping[str, Any], cwd: str, env: Mapping[str, str]) -> list[Touch]:
    if name.startswith("mcp__") or name in CLAUDE_NO_FILES:
        return []  # MCP tools go through their own servers (gitkb's propose_kb_edit among them)
    if name == "Bash":
        command = args.get("command")
        if not isinstance(command, str):
            return [Touch(UNKNOWN, cwd, "Bash without a command")]
        return shell_touches(command, cwd, env)
    if name in CLAUDE_WRITE_TOOLS:
        return [Touch(WRITE, join_cwd(cwd, str(args.get(CLAUDE_WRITE_TOOLS[name]) or "")), name)]
    if name in CLAUDE_READ_TOOLS:
        return [Touch(READ, join_cwd(cwd, str(args.get(CLAUDE_READ_TOOLS[name]) or "")), name)]
    return _other_tool(name, args, cwd, env)


def _other_tool(name: str, args: Mapping[str, Any], cwd: str, env: Mapping[str, str]) -> list[Touch]:
    """Another runtime's tool in the same input shape (``run_shell_command``, ``write_file``...), or one
    we do not know: a ``command`` is classified as shell, every path-like argument is touched as the
    tool's name says (read, write) or in an unknown way."""
    low = name.lower()
    kind = READ if low in PLAIN_READ else WRITE if low in PLAIN_WRITE else UNKNOWN
    out: list[Touch] = []
    if isinstance(args.get("command"), str):
        out.extend(shell_touches(args["command"], join_cwd(cwd, str(args.get("directory") or "")), env))
        if low in SHELL_TOOLS:
            return out
    for key, value in args.items():
        values = value if isinstance(value, list) else [value]
        if PATH_KEYS.search(str(key)):
            out.extend(Touch(kind, join_cwd(cwd, v), name) for v in values if isinstance(v, str) and v)
    return out


def _plain(name: str, data: Mapping[str, Any], cwd: str, env: Mapping[str, str]) -> list[Touch]:
    low = name.lower()
    paths = [data.get("path"), *(data.get("paths") or [] if isinstance(data.get("paths"), list) else [])]
    for key in ("new_path", "destination", "to", "target"):
        paths.append(data.get(key))
    given = [p for p in paths if isinstance(p, str) and p]
    out: list[Touch] = []
    command = data.get("command")
    if isinstance(command, str) and (low in SHELL_TOOLS or "path" not in data):
        out.extend(shell_touches(command, cwd, env))
    elif isinstance(command, list) and all(isinstance(c, str) for c in command):
        out.extend(shell_touches(shlex.join(command), cwd, env))  # argv: quoted back into one line
    if low in PLAIN_READ:
        out.extend(Touch(READ, join_cwd(cwd, p), name) for p in given)
    elif low in PLAIN_WRITE:
        out.extend(Touch(WRITE, join_cwd(cwd, p), name) for p in given)
    else:  # an unknown tool, or a path beside a shell command
        out.extend(Touch(UNKNOWN, join_cwd(cwd, p), name) for p in given)
    return out
