"""The Workspace's Embeddings: building, waiting for vectors, status, verify, re-embed, the active identity."""

from __future__ import annotations

import logging
from typing import Any

from gitkb.core.errors import InvalidArgument
from gitkb.services.derived import embeddings, identity
from gitkb.services.dispatch import scope
from gitkb.services.runtime import jobs, vector_wait
from gitkb.workspace.base import WorkspaceBase, tool

log = logging.getLogger("gitkb")


def _seq_range(value: Any) -> tuple[int, int]:
    if (
        not isinstance(value, list | tuple)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
    ):
        raise InvalidArgument(
            f"vectors_range must be [after_seq, upto_seq] as a write returned it, got {value!r}"
        )
    return int(value[0]), int(value[1])


class EmbeddingTools(WorkspaceBase):
    """Embeddings: building, waiting for vectors, status, verify, re-embed, the active identity."""

    # -- embeddings ------------------------------------------------------------

    @tool
    def build_embeddings(self, force: bool = False, progress: Any = None) -> dict[str, Any]:
        """Block until every chunk has its vector (``force``: re-embed everything); returns ``chunks_embedded``."""
        return jobs.run_inline(self.ctx, "build_embeddings", {"force": bool(force)}, progress=progress)

    @tool
    def wait_for_vectors(self, vectors_range: list[int], progress: Any = None) -> dict[str, Any]:
        """Block until the chunks a write reported (its ``vectors_range``) have their vectors; returns
        ``vectors: ready`` with how many were embedded and reused, whoever did the work."""
        after, upto = _seq_range(vectors_range)
        return vector_wait.wait_for_range(self.ctx, after, upto, progress=progress)

    @tool
    def embeddings_status(self) -> dict[str, Any]:
        """available, provider, model, identity, fingerprint, chunk_count, pending, collections, path."""
        return scope.filter_embeddings_status(self.ctx, self._scope(), embeddings.embeddings_status(self.ctx))

    @tool
    def verify(self, index_name: str | None = None, repair: bool = False) -> dict[str, Any]:
        """Compare the catalog with the keyword index, the vectors, the clones and the watermarks;
        ``repair`` fixes what the derived stores can. ``clean``: nothing differs (after the repair)."""
        if repair:  # it writes the keyword index and the vectors: the writer runs it, as a job
            # a held view's repair re-clones or fetches only the sources its roots reach (reads_disk)
            params = self._held("verify", {"index_name": index_name})
            return jobs.run_inline(self.ctx, "verify_repair", params)
        from gitkb.services.operations import verify  # heavy: pygit2, the source registry

        return verify.verify(self.ctx, index_name=index_name)

    @tool
    def reembed(self, index_name: str | None = None, progress: Any = None) -> dict[str, Any]:
        """Re-embed an index (default: every index stranded by a model change) into its active identity."""
        return jobs.run_inline(self.ctx, "reembed", {"index_name": index_name}, progress=progress)

    @tool
    def set_embedding_identity(self, provider: str, model: str | None = None) -> dict[str, Any]:
        """Change the workspace's active embedding identity (indexes with vectors elsewhere need a re-embed)."""
        return identity.set_active_identity(self.ctx, provider, model)
