"""gitkb: searchable knowledge bases over documentation in git, with reviewed agent edits."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Workspace", "__version__"]

if TYPE_CHECKING:
    from gitkb.workspace import Workspace


def __getattr__(name: str) -> Any:
    # Lazy so that `import gitkb` (and the CLI's start-up) stays light.
    if name == "Workspace":
        from gitkb.workspace import Workspace  # heavy: tantivy; `import gitkb` stays light

        return Workspace
    raise AttributeError(name)
