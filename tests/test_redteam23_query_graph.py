"""redteam23: the default model's int8 query graph file, ``<cache>/all-minilm-l6-v2-int8/
query-int8-<digest>.onnx`` (``core/embedders/minilm_query.ensure_query_graph``), with the real model.

The name is predictable (the digest of the installed model file's path, size and mtime and the
builder's version), and a file found there was loaded as is. What was tried: a graph planted there
as a symlink to a file elsewhere, or as a file another user owns (it returns other vectors than
the documents' graph: every search would rank by them); a model folder that is a symlink to
another user's directory (stale-graph removal deletes files there); a stale graph that is a
symlink to a file outside (only the link goes). What got through was fixed by the lead
(``minilm_query.ensure_query_graph`` loads only a regular file of this user's in a folder of this
user's that no one else may write, and ``FastEmbedMiniLM._agreeing`` checks the graph's vector of a
probe text against the documents' graph before any query runs on it).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gitkb.core.embedders import fastembed_minilm as fm
from gitkb.core.embedders import minilm_query
from gitkb.core.embedders.registry import create_embedder
from gitkb.core.errors import EmbeddingNotConfigured

NOBODY = 65534
QUERY = "how do I rotate the API keys"


def _embedder(cache: Path, **options: Any) -> Any:
    return create_embedder("fastembed", "all-minilm-l6-v2", cache_dir=cache, options=options)


@pytest.fixture(scope="module")
def tampered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real query graph with one weight negated: loads and runs, answers other vectors."""
    import onnx  # heavy: onnx, only these tests edit a graph
    from onnx import numpy_helper  # heavy: onnx

    cache = tmp_path_factory.mktemp("honest-cache")
    e = _embedder(cache)
    e.embed_query(QUERY)
    [built] = (cache / fm.MODEL_DIR_NAME).glob("query-int8-*.onnx")
    model = onnx.load(str(built))
    for init in model.graph.initializer:
        arr = numpy_helper.to_array(init)
        if arr.dtype == np.float32 and arr.size >= 384:
            init.CopyFrom(numpy_helper.from_array(-arr, init.name))
            break
    out = tmp_path_factory.mktemp("elsewhere") / "evil.onnx"
    onnx.save(model, str(out))
    return out


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    """The query's vector on the documents' graph."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        return np.array(_embedder(Path(d), query_graph="exact").embed_query(QUERY))


def _target(cache: Path) -> Path:
    model_dir = fm.assemble_model_dir(cache)
    return model_dir / minilm_query.graph_name(fm.packaged_model_file())


def _cos_to(reference: np.ndarray, cache: Path) -> float:
    return float(np.array(_embedder(cache).embed_query(QUERY)) @ reference)


def test_an_honest_cache_answers_the_documents_vectors(tmp_path: Path, reference: np.ndarray) -> None:
    """The baseline the attacks compare with (and a graph the owner built is reused)."""
    assert _cos_to(reference, tmp_path) >= 0.999
    assert _cos_to(reference, tmp_path) >= 0.999


def test_a_graph_planted_as_a_symlink_is_not_loaded(
    tmp_path: Path, tampered: Path, reference: np.ndarray
) -> None:
    target = _target(tmp_path)
    target.symlink_to(tampered)
    assert _cos_to(reference, tmp_path) >= 0.999  # got: the tampered graph's vector (cosine 0.07)


def test_a_graph_another_user_owns_is_not_loaded(
    tmp_path: Path, tampered: Path, reference: np.ndarray
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the planted file to another user")
    target = _target(tmp_path)
    shutil.copyfile(tampered, target)
    os.chown(target, NOBODY, NOBODY)
    assert _cos_to(reference, tmp_path) >= 0.999


def test_the_tampered_graph_really_answers_other_vectors(tampered: Path, reference: np.ndarray) -> None:
    """The attack itself: loaded directly, the planted graph moves the query's vector (so the
    tests above and below pass because it is refused, not because it would not load)."""
    import onnxruntime as ort  # heavy: only this test loads a graph by hand

    e = _embedder(tampered.parent / "probe-cache", query_graph="exact")
    session = ort.InferenceSession(str(tampered), providers=["CPUExecutionProvider"])
    got = e._run([e._tok.encode(QUERY)], session)[0]
    assert float(got @ reference) < 0.99


def test_a_tampered_graph_of_this_users_own_is_caught_by_the_probe(
    tmp_path: Path, tampered: Path, reference: np.ndarray
) -> None:
    """A regular file of this user's at the graph's name (0644: it passes the ownership checks) that
    answers other vectors: the first query's probe refuses it, queries use the documents' graph
    (bit for bit its vector), the embedder says why, the file is removed, and the next embedder
    builds an honest graph."""
    target = _target(tmp_path)
    shutil.copyfile(tampered, target)
    os.chmod(target, 0o644)
    e = _embedder(tmp_path)
    assert float(np.array(e.embed_query(QUERY)) @ reference) > 0.99999
    assert e.query_graph == "exact" and "answers other vectors" in str(e.query_graph_error)
    assert not target.exists()
    again = _embedder(tmp_path)
    assert float(np.array(again.embed_query(QUERY)) @ reference) >= 0.999 and again.query_graph == "int8"
    assert target.is_file() and not target.is_symlink()


def test_a_model_folder_others_may_write_to_is_closed_to_them(tmp_path: Path, reference: np.ndarray) -> None:
    """A group- or world-writable model folder of this user's (umask 002, a chmod) would let others
    plant a graph: it loses their write access before a graph is built or loaded, and the graph
    is written writable by its owner only."""
    model_dir = fm.assemble_model_dir(tmp_path)
    os.chmod(model_dir, 0o777)
    assert _cos_to(reference, tmp_path) >= 0.999
    assert os.stat(model_dir).st_mode & 0o022 == 0
    [built] = model_dir.glob("query-int8-*.onnx")
    assert os.stat(built).st_mode & 0o022 == 0


def test_stale_graph_removal_deletes_nothing_in_a_symlinked_model_folder(
    tmp_path: Path, reference: np.ndarray
) -> None:
    """``<cache>/all-minilm-l6-v2-int8`` is a symlink to another user's directory holding a file
        named like a stale graph: the build's clean-up deleted it (and wrote the graph there). Now the
    model folder is refused: nothing is linked, written, built or deleted there, and the embedder
    says why."""
    theirs = tmp_path / "other-user"
    theirs.mkdir()
    victim = theirs / "query-int8-theirs.onnx"
    victim.write_bytes(b"their file")
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / fm.MODEL_DIR_NAME).symlink_to(theirs, target_is_directory=True)
    with pytest.raises(EmbeddingNotConfigured, match="is a symlink"):
        _embedder(cache).embed_query(QUERY)
    assert list(theirs.iterdir()) == [victim] and victim.read_bytes() == b"their file"  # nothing written


def test_a_stale_graph_that_is_a_symlink_goes_but_not_its_target(
    tmp_path: Path, reference: np.ndarray
) -> None:
    """Held: removing a stale graph removes the link, never the file it points to."""
    outside = tmp_path / "outside.onnx"
    outside.write_bytes(b"keep me")
    model_dir = fm.assemble_model_dir(tmp_path / "cache")
    (model_dir / "query-int8-000000000000.onnx").symlink_to(outside)
    assert _cos_to(reference, tmp_path / "cache") >= 0.999
    assert outside.read_bytes() == b"keep me"
    assert not (model_dir / "query-int8-000000000000.onnx").is_symlink()


def test_a_directory_planted_at_the_graphs_name_falls_back_to_the_documents_graph_and_says_so(
    tmp_path: Path, reference: np.ndarray
) -> None:
    """Held: nothing is loaded from it; queries use the documents' graph (bit for bit its
    vector) and the embedder says why."""
    target = _target(tmp_path)
    target.mkdir()
    (target / "model.onnx").write_bytes(b"not a graph")
    e = _embedder(tmp_path)
    got = np.array(e.embed_query(QUERY))
    assert e.query_graph == "exact" and e.query_graph_error, e.query_graph_error
    assert float(got @ reference) > 0.99999


def test_a_directory_named_like_a_stale_graph_does_not_cost_the_int8_graph(tmp_path: Path) -> None:
    """The clean-up after a build unlinks every other query-int8-*.onnx; a directory of that name
    raises IsADirectoryError there, after the graph was built, and the embedder falls back to the
    documents' graph for good (a planted folder turns the int8 graph off)."""
    model_dir = fm.assemble_model_dir(tmp_path)
    (model_dir / "query-int8-000000000000.onnx").mkdir()
    e = _embedder(tmp_path)
    e.embed_query(QUERY)
    assert e.query_graph == "int8", e.query_graph_error
