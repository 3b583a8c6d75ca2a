"""Retrieval evaluation, part of the product (``gitkb eval beir`` / ``gitkb eval qa``).

* ``datasets``: BEIR and QA folder loaders (validate before anything is written);
* ``metrics``: nDCG@k, Recall@k, MRR@k, computed by trec_eval (pytrec-eval-terrier);
* ``runners``: build or reuse the index, query it through SEARCH, score.
"""

from __future__ import annotations

from gitkb.services.evaluation.runners import BEIR_MEASURES, MODES, QA_MEASURES, eval_beir, eval_qa

__all__ = ["BEIR_MEASURES", "MODES", "QA_MEASURES", "eval_beir", "eval_qa"]
