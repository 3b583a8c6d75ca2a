"""gitkb eval beir DIR · gitkb eval qa DIR — retrieval quality on real data."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from gitkb.cli.output import table
from gitkb.cli.progress import Bar
from gitkb.cli.runner import run

MODES = ["keyword", "semantic", "hybrid"]


class StageBars:
    """One progress bar per stage (ingest, embed, search, ask), on stderr, only on a terminal."""

    def __init__(self) -> None:
        self.stage: str | None = None
        self.bar: Bar | None = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage != self.stage:
            self.close()
            self.stage = stage
            self.bar = Bar(f"{stage:<7}")
        if self.bar is not None:
            self.bar(done, max(total, 1))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _with_bars(call: Callable[[Any, StageBars], dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
    def wrapped(ws: Any) -> dict[str, Any]:
        bars = StageBars()
        try:
            return call(ws, bars)
        finally:
            bars.close()

    return wrapped


def _render(measures: list[str]) -> Callable[[dict[str, Any]], None]:
    def render(data: dict[str, Any]) -> None:
        click.echo(table([[m, f"{data[m]:.4f}"] for m in measures], ["measure", "value"]))
        extra = [
            f"{data.get('queries')} queries, mode {data.get('mode')}, index {data.get('index_name')}"
            + (" (reused)" if data.get("index_reused") else ""),
            f"search depth {data.get('search_depth')}"
            + (f" (--top-n {data['top_n']})" if data.get("top_n") else "")
            + f"; search p50 {data.get('search_p50_ms')} ms, p95 {data.get('search_p95_ms')} ms;"
            f" ingest {data.get('ingest_seconds')} s",
        ]
        click.echo("\n".join(extra))

    return render


TOP_N = click.option(
    "--top-n",
    type=click.IntRange(1, 100),
    help="Hits each query asks for, as a caller asks (e.g. 10); default 100 (beir) / 50 (qa), deeper than "
    "[chroma] ef_search, so a change of depth shows only with this.",
)


@click.group("eval")
def eval_group() -> None:
    """Measure retrieval quality (nDCG, recall, MRR) on a BEIR folder or a QA folder."""


@eval_group.command("beir")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--split", default="train", show_default=True, help="Judgments from qrels/<split>.tsv.")
@click.option("--mode", type=click.Choice(MODES), default="keyword", show_default=True)
@click.option("--index", "index_name", help="Index to build or reuse (default eval-beir-<folder>[-keyword]).")
@click.option(
    "--chunk-strategy",
    type=click.Choice(["sentence", "one_chunk_per_doc", "auto"]),
    help="Chunking of corpus entries (default one_chunk_per_doc: each entry is judged whole).",
)
@click.option("--chunk-size", type=int)
@click.option("--chunk-overlap", type=int)
@TOP_N
def beir(
    directory: str, split: str, mode: str, index_name: str | None, top_n: int | None, **chunking: Any
) -> None:
    """nDCG@10, Recall@10, Recall@100, MRR@10 on a BEIR folder (corpus.jsonl, queries, qrels/)."""
    run(
        _with_bars(
            lambda ws, bars: ws.eval_beir(
                directory,
                split=split,
                mode=mode,
                index_name=index_name,
                top_n=top_n,
                progress=bars,
                **chunking,
            )
        ),
        _render(["ndcg@10", "recall@10", "recall@100", "mrr@10"]),
    )


@eval_group.command("qa")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--mode", type=click.Choice(MODES), default="keyword", show_default=True)
@click.option("--index", "index_name", help="Index to build or reuse (default eval-qa-<folder>[-keyword]).")
@click.option("--no-ask", is_flag=True, help="Skip the ASK citation check.")
@TOP_N
def qa(directory: str, mode: str, index_name: str | None, no_ask: bool, top_n: int | None) -> None:
    """Recall@1/5/10 and MRR@10 of the gold document, and whether ASK cites it (docs/ + questions*.jsonl)."""
    measures = ["recall@1", "recall@5", "recall@10", "mrr@10"] + (
        [] if no_ask else ["ask_cites_gold", "ask_answered", "ask_lead_recall"]
    )
    run(
        _with_bars(
            lambda ws, bars: ws.eval_qa(
                directory, mode=mode, index_name=index_name, ask=not no_ask, top_n=top_n, progress=bars
            )
        ),
        _render(measures),
    )


def register(group: click.Group) -> None:
    group.add_command(eval_group)
