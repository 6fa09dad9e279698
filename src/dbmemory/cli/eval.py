"""``dbmemory eval locomo PATH``: replay LoCoMo and score what a turn would inject.

Tier 1 (always, no model key): evidence recall, answer recall, tokens per question, injection
latency, live and expired items, by LoCoMo category, next to the baselines (random turns and
BM25 over the raw turns at the same budget, full context). Tier 2 (``--model`` a real model):
the model extracts during the replay, answers each question from the injected memory, and a
judge grades the answers. The criteria: ``docs/eval.md``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from dbmemory.agent.eval.run import DEFAULT_BUDGET, METHODS, EvalOptions, evaluate_locomo
from dbmemory.agent.setup import choose_model, ensure_agent, ensure_schema
from dbmemory.cli._common import EXIT_CODES_HELP, JsonOption, print_json
from dbmemory.cli._database import engine_session
from dbmemory.cli._output import console, print_table
from dbmemory.cli.replay import ModelOption
from dbmemory.db.engine import redact_url
from dbmemory.errors import PROFILE_MODULES, InvalidArgumentError, require_extra

__all__ = ["register", "locomo"]

eval_app = typer.Typer(
    help="Measure what dbmemory's memory gives the model (docs/eval.md). " + EXIT_CODES_HELP,
    epilog="Example: dbmemory eval locomo locomo10.json --samples conv-26 --out results/",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add the ``eval`` command group to ``app``."""
    app.add_typer(eval_app, name="eval")
    eval_app.command("locomo", epilog=EXIT_CODES_HELP)(locomo)


def _pct(value: Any) -> str:
    return "" if value is None else f"{100 * value:.1f}%"


def _num(value: Any, digits: int = 0) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


def locomo(
    path: Annotated[Path, typer.Argument(metavar="PATH", help="LoCoMo's locomo10.json (or a file in its format).")],
    samples: Annotated[
        str | None,
        typer.Option("--samples", metavar="IDS", help="Comma-separated sample ids, e.g. conv-26,conv-30 (default: all).", show_default=False),
    ] = None,
    sessions: Annotated[
        int | None,
        typer.Option("--sessions", min=1, metavar="N", help="Replay the first N sessions; questions with later evidence are left out.", show_default=False),
    ] = None,
    speakers: Annotated[
        str, typer.Option("--speakers", metavar="a|both", help="'both': each speaker is a user of their own; 'a': speaker_a only.")
    ] = "both",
    model: ModelOption = None,
    judge: Annotated[
        str | None,
        typer.Option("--judge", metavar="MODEL", help="Tier 2's judge model (default: --model).", show_default=False),
    ] = None,
    budget: Annotated[
        int, typer.Option("--budget", min=50, metavar="TOKENS", help="Every method's budget in o200k tokens: the baselines fill it; dbmemory's whole injected memory of a question stays within it.")
    ] = DEFAULT_BUDGET,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random baseline.")] = 0,
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", metavar="DIR", help="Write one JSON line per question and method, and summary.json, there.", show_default=False),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option(
            "--database-url", "--url", metavar="URL",
            help="Replay into this database (its replay users are cleared first). Default: a new SQLite file in a temporary folder.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Replay LoCoMo conversations and score the memory a turn would inject for each question.

    Example:

        dbmemory eval locomo locomo10.json --samples conv-26 --sessions 5

        dbmemory eval locomo locomo10.json --out results/ --json

        dbmemory eval locomo locomo10.json --model gpt-4o-mini --judge gpt-4o-mini

    locomo10.json is LoCoMo, the public data set of Snap Research (CC BY-NC 4.0).
    """
    require_extra("profile", PROFILE_MODULES)
    require_extra("items", ("bm25s", "Stemmer"))
    if speakers not in ("a", "both"):
        raise InvalidArgumentError(f"--speakers must be 'a' or 'both', not {speakers!r}")
    choice = choose_model(model)
    if choice.notice:
        typer.echo(choice.notice, err=as_json)
    ids = [s.strip() for s in samples.split(",") if s.strip()] if samples else None
    options = EvalOptions(
        samples=ids, sessions=sessions, speakers=speakers, model=choice.model, complete=choice.complete,
        answer_model=None if choice.scripted else choice.model,
        judge_model=None if choice.scripted else (judge or choice.model),
        budget=budget, seed=seed, progress=not as_json, out_dir=out_dir,
    )
    with tempfile.TemporaryDirectory(prefix="dbmemory-eval-") as tmp:
        target = url or f"sqlite:///{Path(tmp) / 'eval.db'}"
        with engine_session(target, "evaluating on LoCoMo") as engine:
            ensure_schema(engine)
            ensure_agent(engine, options.agent_code)
            if not as_json:
                console().print(f"Evaluating {path.name} on {redact_url(engine.url)}, model {choice.model!r}, speakers {speakers}")
            result = evaluate_locomo(engine, path, options)
    if as_json:
        print_json(result.summary)
        return
    _print(result.summary)


def _print(summary: dict[str, Any]) -> None:
    out = console()
    methods = summary["methods"]
    rows = []
    for name in METHODS:
        g = methods[name]["non_adversarial"]
        rows.append([name, g["n"], _pct(g["evidence_recall"]), _pct(g["answer_recall"]), _num(g["tokens_mean"]), _num(g["tokens_p95"])])
    cols = ["method", "n", "evidence recall", "answer recall", "tokens mean", "tokens p95"]
    print_table(cols, rows, title=f"Non-adversarial questions (categories 1-4), every method within {summary['budget']} tokens ({summary['tokenizer']})", right=cols[1:])
    rows = []
    for number, g in methods["dbmemory"]["by_category"].items():
        base = methods["bm25"]["by_category"][number]
        rows.append([f"{number} {g['name']}", g["n"], _pct(g["evidence_recall"]), _pct(g["answer_recall"]), _num(g["tokens_mean"]), _pct(base["evidence_recall"]), _pct(base["answer_recall"])])
    cols = ["category", "n", "evidence", "answer", "tokens", "BM25 evidence", "BM25 answer"]
    print_table(cols, rows, title="dbmemory by LoCoMo category (numbering of the file)", right=cols[1:])
    g = methods["dbmemory"]["non_adversarial"]
    out.print(
        f"Injection latency p50 {_num(g.get('latency_ms_p50'), 2)} ms, p95 {_num(g.get('latency_ms_p95'), 2)} ms; "
        f"items at question time: {summary['items']['live']} live, {summary['items']['expired']} expired.",
        markup=False, highlight=False,
    )
    tier2 = summary.get("tier2")
    if tier2:
        out.print(
            f"Tier 2 ({tier2['answer_model']}, judge {tier2['judge_model']}): judge {_pct(g.get('judge'))}, strict {_pct(g.get('judge_strict'))}, "
            f"F1 {_pct(g.get('f1'))}, prompt tokens per query {_num(g.get('answer_prompt_tokens_mean'))}, total p95 "
            f"{_num(g.get('total_latency_ms_p95'))} ms, ingest ${_num(tier2['ingest']['usd'], 4)}.",
            markup=False, highlight=False,
        )
    else:
        out.print("Tier 2 not run (no --model): no answer model, no judge.", markup=False, highlight=False)
