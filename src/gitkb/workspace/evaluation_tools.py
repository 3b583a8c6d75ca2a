"""The Workspace's Retrieval evaluation (``services/evaluation``): ``gitkb eval beir`` / ``gitkb eval qa``."""

from __future__ import annotations

import logging
from typing import Any

from gitkb.services import evaluation
from gitkb.workspace.base import WorkspaceBase, tool

log = logging.getLogger("gitkb")


class EvaluationTools(WorkspaceBase):
    """Retrieval evaluation (``services/evaluation``): ``gitkb eval beir`` / ``gitkb eval qa``."""

    # -- evaluation (services.evaluation) ------------------------------------

    @tool
    def eval_beir(
        self,
        path: str,
        split: str = "train",
        mode: str | None = None,
        index_name: str | None = None,
        chunk_strategy: str | None = None,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        top_n: int | None = None,
        progress: Any = None,
    ) -> dict[str, Any]:
        """nDCG@10, Recall@10/100, MRR@10 of SEARCH on a BEIR folder; ``progress(stage, done, total)``;
        ``top_n``: hits each query asks for (default 100)."""
        return evaluation.eval_beir(
            self.ctx,
            path,
            split=split,
            mode=mode,
            index_name=index_name,
            chunk_strategy=chunk_strategy,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            top_n=top_n,
            progress=progress,
        )

    @tool
    def eval_qa(
        self,
        path: str,
        mode: str | None = None,
        index_name: str | None = None,
        ask: bool = True,
        top_n: int | None = None,
        progress: Any = None,
    ) -> dict[str, Any]:
        """Recall@1/5/10 and MRR@10 of the gold document, and ASK's gold-citation rate, on a QA folder;
        ``top_n``: hits each query asks for (default 50)."""
        return evaluation.eval_qa(
            self.ctx, path, mode=mode, index_name=index_name, ask=ask, top_n=top_n, progress=progress
        )
