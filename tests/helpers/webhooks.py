"""A signed GitHub push delivery, as a forge sends one (the tests of the webhook route, of nodes
and of roots held to a server's allowed roots all post the same shape)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from gitkb.services.changes.webhooks import github_signature


def github_push(
    secret: str, before: str, after: str, remote: Path, *, html_url: str = "https://example.invalid/x"
) -> tuple[bytes, dict[str, str]]:
    """The body and headers of a push of ``main`` from ``before`` to ``after`` in the repository
    at ``remote`` (a new delivery id each call), signed with ``secret``."""
    payload = {
        "ref": "refs/heads/main",
        "before": before,
        "after": after,
        "repository": {"clone_url": f"file://{remote}", "html_url": html_url},
        "commits": [],
    }
    body = json.dumps(payload).encode()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": github_signature(secret, body),
    }
    return body, headers
