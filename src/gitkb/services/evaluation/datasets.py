"""Loaders for evaluation data: BEIR folders and question/answer folders.

BEIR layout (``DIR``)::

    corpus.jsonl               {"_id", "title", "text", ...}   one line per document
    queries.<split>.jsonl      {"_id", "text", ...}            else queries.jsonl
    qrels/<split>.tsv          query-id <TAB> corpus-id <TAB> score, optional header

QA layout (``DIR``, e.g. ../shared/data/awsdocs)::

    docs/...                   the documents
    questions*.jsonl           {"question", "doc" (relative to docs/), "answer", "id"?}

Loaders read and validate everything before any index is touched: a bad file
raises ``InvalidArgument`` naming the file and line, and nothing is written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from gitkb.core.errors import InvalidArgument, NotFound

CORPUS_PREFIX = "corpus/"
CORPUS_SUFFIX = ".txt"


@dataclass(frozen=True)
class BeirDoc:
    id: str
    title: str
    text: str

    def body(self) -> str:
        """What gets stored: title, blank line, text (either may be empty)."""
        return "\n\n".join(p for p in (self.title.strip(), self.text.strip()) if p)


@dataclass(frozen=True)
class BeirSet:
    name: str
    corpus: list[BeirDoc]
    queries: dict[str, str]  # only queries that have judgments in the split
    qrels: dict[str, dict[str, int]]
    skipped_empty: int = 0


@dataclass(frozen=True)
class QaQuestion:
    id: str
    question: str
    doc: str
    answer: str


@dataclass(frozen=True)
class QaSet:
    name: str
    docs_dir: Path
    questions: list[QaQuestion]


def doc_path(doc_id: str) -> str:
    """Stored path of a BEIR document; ``doc_id_from_path`` inverts it."""
    return f"{CORPUS_PREFIX}{quote(doc_id, safe='')}{CORPUS_SUFFIX}"


def doc_id_from_path(path: str) -> str | None:
    if not (path.startswith(CORPUS_PREFIX) and path.endswith(CORPUS_SUFFIX)):
        return None
    return unquote(path[len(CORPUS_PREFIX) : -len(CORPUS_SUFFIX)])


def _folder(path: Any, what: str) -> Path:
    if not isinstance(path, str | os.PathLike) or not str(path).strip():
        raise InvalidArgument(f"{what} needs a folder path")
    p = Path(path).expanduser()
    if not p.is_dir():
        raise NotFound(
            f"folder {str(path)!r} does not exist", next_steps=["check the path; it is read by this process"]
        )
    return p


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        fh = path.open(encoding="utf-8")
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path}: {exc}") from exc
    with fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise InvalidArgument(f"{path}:{n} is not valid JSON ({exc})") from exc
            if not isinstance(obj, dict):
                raise InvalidArgument(f"{path}:{n} must be a JSON object")
            yield n, obj


def _str_field(obj: dict[str, Any], key: str, where: str, *, required: bool = True) -> str:
    v = obj.get(key)
    if v is None and not required:
        return ""
    if isinstance(v, int) and not isinstance(v, bool):
        v = str(v)
    if not isinstance(v, str) or (required and not v.strip()):
        raise InvalidArgument(f"{where}: field {key!r} must be a non-empty string")
    return v


def load_beir(path: Any, split: str = "train") -> BeirSet:
    root = _folder(path, "eval beir")
    if not isinstance(split, str) or not split or "/" in split or split.startswith("."):
        raise InvalidArgument(f"split must be a name such as 'train' or 'test', got {split!r}")
    corpus_file = root / "corpus.jsonl"
    qrels_file = root / "qrels" / f"{split}.tsv"
    queries_file = root / f"queries.{split}.jsonl"
    if not queries_file.is_file():
        queries_file = root / "queries.jsonl"
    for f in (corpus_file, queries_file, qrels_file):
        if not f.is_file():
            raise InvalidArgument(
                f"{root} is not a BEIR folder for split {split!r}: {f.name} is missing",
                next_steps=[
                    "a BEIR folder holds corpus.jsonl, queries[.<split>].jsonl and qrels/<split>.tsv"
                ],
            )
    corpus: list[BeirDoc] = []
    seen: set[str] = set()
    empty = 0
    for n, obj in _jsonl(corpus_file):
        where = f"{corpus_file}:{n}"
        doc = BeirDoc(
            _str_field(obj, "_id", where),
            _str_field(obj, "title", where, required=False),
            _str_field(obj, "text", where, required=False),
        )
        if doc.id in seen:
            raise InvalidArgument(f"{where}: document id {doc.id!r} appears twice")
        seen.add(doc.id)
        if not doc.body():
            empty += 1
            continue
        corpus.append(doc)
    if not corpus:
        raise InvalidArgument(f"{corpus_file} holds no documents")
    qrels = _load_qrels(qrels_file)
    all_queries = {}
    for n, obj in _jsonl(queries_file):
        where = f"{queries_file}:{n}"
        all_queries[_str_field(obj, "_id", where)] = _str_field(obj, "text", where)
    queries = {qid: all_queries[qid] for qid in qrels if qid in all_queries}
    if not queries:
        raise InvalidArgument(f"no query of {queries_file.name} has judgments in {qrels_file}")
    qrels = {qid: qrels[qid] for qid in queries}
    return BeirSet(root.absolute().name, corpus, queries, qrels, empty)


def _load_qrels(path: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            parts = line.rstrip("\r\n").split("\t")
            if len(parts) == 4:  # TREC format: qid 0 docid score
                parts = [parts[0], parts[2], parts[3]]
            if len(parts) != 3:
                raise InvalidArgument(f"{path}:{n}: expected query-id<TAB>corpus-id<TAB>score")
            try:
                score = int(parts[2])
            except ValueError:
                if n == 1:  # the header line
                    continue
                raise InvalidArgument(f"{path}:{n}: score {parts[2]!r} is not an integer") from None
            out.setdefault(parts[0], {})[parts[1]] = score
    if not out:
        raise InvalidArgument(f"{path} holds no judgments")
    return out


def load_qa(path: Any) -> QaSet:
    root = _folder(path, "eval qa")
    docs = root / "docs"
    files = sorted(root.glob("questions*.jsonl"))
    if not docs.is_dir() or not files:
        raise InvalidArgument(
            f"{root} is not a QA folder: it needs docs/ and questions*.jsonl",
            next_steps=["questions are JSON lines with question, doc (relative to docs/) and answer"],
        )
    questions: list[QaQuestion] = []
    for f in files:
        for n, obj in _jsonl(f):
            where = f"{f}:{n}"
            doc = _str_field(obj, "doc", where).strip().replace("\\", "/")
            while doc.startswith("./"):
                doc = doc[2:]
            if not (docs / doc).is_file():
                raise InvalidArgument(f"{where}: gold document {doc!r} is not under {docs}")
            qid = _str_field(obj, "id", where, required=False) or f"{f.stem}:{n}"
            questions.append(
                QaQuestion(
                    qid,
                    _str_field(obj, "question", where),
                    doc,
                    _str_field(obj, "answer", where, required=False),
                )
            )
    if not questions:
        raise InvalidArgument(f"no questions in {', '.join(f.name for f in files)}")
    return QaSet(root.absolute().name, docs, questions)
