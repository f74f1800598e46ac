"""`suli eval`: nDCG@10 and recall@100 of the live search on any BEIR-format collection."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.progress import Progress

from cli.context import searcher
from cli.output import emit_json, handle_errors, json_option, principal_option
from suli.evaluation import mean_metrics, read_qrels, read_queries
from suli.models import SearchRequest

EVAL_DEPTH = 100  # recall@100 needs 100 results; the public limit (25) does not apply here


@click.command("eval", short_help="nDCG@10 and recall@100 against judged queries.")
@click.option(
    "--qrels", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True
)
@click.option(
    "--queries", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True
)
@click.option(
    "--mode", type=click.Choice(["hybrid", "text", "vector"]), default="hybrid", show_default=True
)
@principal_option
@json_option
@click.pass_context
@handle_errors
def evaluate(
    ctx: click.Context, qrels: Path, queries: Path, mode: str, principal_id: str, as_json: bool
) -> None:
    """Measure relevance of the indexed items against judged queries (BEIR TSV + JSONL)."""
    s = searcher(ctx)  # configuration first: a bad setting is reported before any file
    judged = read_qrels(qrels)
    texts = read_queries(queries, set(judged))
    principal = s.principal(principal_id)
    runs: dict[str, list[str]] = {}
    with Progress(console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("evaluating", total=len(texts))
        for qid, text in texts.items():
            resp = s.search(principal, SearchRequest(query=text, limit=EVAL_DEPTH, mode=mode))  # type: ignore[arg-type]
            runs[qid] = [r.id for r in resp.results]
            progress.advance(task)
    metrics = mean_metrics(runs, {q: judged[q] for q in texts})
    body = {
        "mode": mode,
        "queries": int(metrics["queries"]),
        "ndcg@10": round(metrics["ndcg@10"], 4),
        "recall@100": round(metrics["recall@100"], 4),
    }
    if as_json:
        emit_json(body)
    else:
        click.echo(
            f"{body['queries']} queries, mode {mode}: nDCG@10 {body['ndcg@10']:.4f}, recall@100 {body['recall@100']:.4f}"
        )
