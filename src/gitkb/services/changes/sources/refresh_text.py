"""The message of a refresh that replayed staged proposals on a new base: one wording for the
operator's answer (``staging.refresh_proposals``) and an agent's cut of it (``fed_view.fed_refresh``)."""

from __future__ import annotations

from collections.abc import Sequence


def refresh_message(
    at: str, applied: Sequence[str], conflicts: Sequence[str], superseded: Sequence[str]
) -> str:
    """``Refreshed on <branch at sha>: N applied, M conflict(s)`` and what the caller can do next."""
    msg = f"Refreshed on {at}: {len(applied)} applied, {len(conflicts)} conflict(s)"
    if conflicts:
        msg += "; a conflicting proposal can be discarded (gitkb proposals discard ID) or proposed again against the new text"
    if superseded:
        msg += f"; superseded review(s) {', '.join(superseded)}: open a new one"
    return msg
