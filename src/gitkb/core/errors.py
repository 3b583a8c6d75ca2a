"""The one error tree of gitkb.

Every domain failure is a ``GitkbError`` subclass with a stable ``code``.
Interfaces map the code once: the action API returns ``{"Success": False,
"Error": message, "code": code}``, HTTP maps it to a status, the CLI prints one
line and exits 1.

Codes (stable, part of the public contract):

=========================  ======  ==================================================
code                       HTTP    meaning
=========================  ======  ==================================================
``invalid_argument``       400     bad input; nothing was written
``unauthorized``           401     missing or wrong credentials
``forbidden``              403     credentials lack the scope, or binding refuses
``not_found``              404     unknown index, document, job, source, review ...
``conflict``               409     duplicate name, write during a rebuild, stale lease
``busy``                   409     the writer is busy with a job that excludes this one
``managed_repo_guard``     409     a write to a git-managed index/repo outside proposals
``review_pending``         409     the action waits for a human review
``review_denied``          409     the review was denied
``too_large``              413     a text or file over the size cap; nothing was written
``validation``             422     a document (sidecar, schema) failed validation
``embedding_not_configured`` 503   no complete embedding identity resolves
``store_unavailable``      503     the catalog or vector store cannot be reached
``forge_error``            502     the forge (GitHub, GitLab) refused or failed
``internal``               500     a bug; the message says where the log is
=========================  ======  ==================================================
"""

from __future__ import annotations

from typing import Any


class GitkbError(Exception):
    code = "internal"
    http_status = 500

    def __init__(
        self,
        message: str,
        *,
        next_steps: list[str] | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.next_steps = list(next_steps or [])
        self.details = dict(details or {})

    def to_response(self) -> dict[str, Any]:
        """The action-API failure shape."""
        out: dict[str, Any] = {"Success": False, "Error": self.message, "code": self.code}
        if self.next_steps:
            out["next_steps"] = self.next_steps
        out.update({k: v for k, v in self.details.items() if k not in out})
        return out


class InvalidArgument(GitkbError):
    code = "invalid_argument"
    http_status = 400


class Unauthorized(GitkbError):
    code = "unauthorized"
    http_status = 401


class Forbidden(GitkbError):
    code = "forbidden"
    http_status = 403


class NotFound(GitkbError):
    code = "not_found"
    http_status = 404


class Conflict(GitkbError):
    code = "conflict"
    http_status = 409


class Busy(GitkbError):
    code = "busy"
    http_status = 409


class ManagedRepoGuard(GitkbError):
    code = "managed_repo_guard"
    http_status = 409

    def __init__(self, message: str, **kw: Any) -> None:
        kw.setdefault(
            "next_steps",
            [
                "Use propose_kb_edit to stage the change on the source's proposal branch",
                "then open_kb_pull_request to send it for review",
            ],
        )
        details = dict(kw.pop("details", None) or {})
        details.setdefault("managed_document_repo", True)
        super().__init__(message, details=details, **kw)


class ReviewPending(GitkbError):
    code = "review_pending"
    http_status = 409


class ReviewDenied(GitkbError):
    code = "review_denied"
    http_status = 409


class TooLarge(GitkbError):
    code = "too_large"
    http_status = 413


class ValidationFailed(GitkbError):
    code = "validation"
    http_status = 422


class EmbeddingNotConfigured(GitkbError):
    code = "embedding_not_configured"
    http_status = 503


class StoreUnavailable(GitkbError):
    code = "store_unavailable"
    http_status = 503


class ForgeError(GitkbError):
    code = "forge_error"
    http_status = 502


ALL_ERRORS: tuple[type[GitkbError], ...] = (
    GitkbError,
    InvalidArgument,
    Unauthorized,
    Forbidden,
    NotFound,
    Conflict,
    Busy,
    ManagedRepoGuard,
    ReviewPending,
    ReviewDenied,
    TooLarge,
    ValidationFailed,
    EmbeddingNotConfigured,
    StoreUnavailable,
    ForgeError,
)

HTTP_STATUS_BY_CODE: dict[str, int] = {cls.code: cls.http_status for cls in ALL_ERRORS}
