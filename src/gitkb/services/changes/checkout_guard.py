"""``gitkb guard``: decide one pending agent tool call against the managed checkouts on this disk.

No workspace is opened: a checkout is recognised by its mark (``.git/gitkb-checkout.json``, see
:mod:`gitkb.stores.checkout_tree`), found by walking up from each path the call touches after
resolving it (``os.path.realpath`` against the call's ``cwd``: symlinks and ``..`` included).
A ``write`` or ``unknown`` touch (:mod:`gitkb.core.tool_calls`) inside a checkout is denied; reads
and everything outside checkouts are allowed, which the hook says by printing nothing.

Answers, in the format each runtime reads:

* Claude Code (input with ``tool_name``): exit 0 and
  ``{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
  "permissionDecisionReason": ...}}`` -- never an explicit ``allow``, which would skip the
  runtime's own permission prompt;
* the plain form: exit 2 (the block code of hook runners), the denial as JSON on stdout and its
  message on stderr.

Input that is not JSON or neither form is denied (exit 2): a guard that cannot read the call
cannot say it stays out of the checkouts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitkb.core.tool_calls import ToolCall, classify
from gitkb.core.touches import READ, Touch
from gitkb.stores.checkout_tree import read_marker


@dataclass(frozen=True)
class Denial:
    source: str
    path: str  # relative to the checkout's root (the repository)
    checkout: str
    touch: Touch
    documents_root: str = ""

    def details(self) -> dict[str, Any]:
        return {
            "decision": "deny",
            "code": "managed_repo_guard",
            "managed_document_repo": True,
            "source": self.source,
            "path": self.path,
            "checkout": self.checkout,
            "reason": self.message(),
            "next_steps": self.next_steps(),
        }

    def message(self) -> str:
        return (
            f"managed_repo_guard: {self.touch.why} would change {self.path!r} in {self.checkout}, a read-only "
            f"checkout of the knowledge base {self.source!r} (managed_document_repo: true). Its files change only "
            "through a reviewed proposal: use propose_kb_edit, then open_kb_pull_request."
        )

    def next_steps(self) -> list[str]:
        p = self.path if self.path not in ("", ".") else "<path in the repository>"
        return [
            f"propose_kb_edit({self.source!r}, {p!r}, search=..., replace=...) (or content=...; "
            "propose_kb_delete / propose_kb_rename for a delete or a move)",
            f"open_kb_pull_request({self.source!r}) to send the staged changes for review",
        ]


def find_checkout(path: str) -> tuple[Path, dict[str, Any]] | None:
    """The checkout holding ``path`` (already resolved) and its mark, walking up to ``/``."""
    p = Path(path)
    for folder in (p, *p.parents):
        mark = read_marker(folder)
        if mark is not None:
            return folder, mark
    return None


def decide(call: ToolCall) -> Denial | None:
    for touch in call.touches:
        if touch.kind == READ:
            continue
        resolved = os.path.realpath(os.path.join(call.cwd, touch.path) if call.cwd else touch.path)
        found = find_checkout(resolved)
        if found is None:
            continue
        root, mark = found
        rel = os.path.relpath(resolved, root)
        return Denial(
            str(mark.get("source", "")),
            "." if rel == "." else rel,
            str(root),
            touch,
            str(mark.get("documents_root") or ""),
        )
    return None


def run_guard(text: str, *, default_cwd: str, env: Mapping[str, str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) for one hook input."""
    try:
        data = json.loads(text)
        call = classify(data, default_cwd=default_cwd, env=env)
    except ValueError as exc:
        msg = f"gitkb guard: cannot read the tool call ({exc}); refused"
        return (
            2,
            json.dumps({"decision": "deny", "code": "invalid_argument", "reason": msg}) + "\n",
            msg + "\n",
        )
    denial = decide(call)
    if denial is None:
        return 0, "", ""
    if call.runtime == "claude":
        fields = {k: v for k, v in denial.details().items() if k != "reason"}  # the message says it already
        reason = denial.message() + " " + json.dumps(fields, sort_keys=True)
        out = {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }
        return 0, json.dumps(out) + "\n", ""
    return 2, json.dumps(denial.details(), sort_keys=True) + "\n", denial.message() + "\n"
