"""The ``memprobe`` command line."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from memprobe.spec.records import Memories, RecordError, load

DESCRIPTION = (
    "MemProbe's tools around the Snakemake workflow (the run itself is `snakemake`): search a "
    "system's store, serve a fake or the local model, estimate a run's cost, sample a human audit."
)


class _Help(argparse.HelpFormatter):
    """Help that ends with the option's default, where it has a meaningful one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default not in (None, False, [], argparse.SUPPRESS) and "default" not in text:
            text += " (default: %(default)s)"
        return text


# What makes a folder a MemProbe workflow: the commands below read it (its config, its runs).
WORKFLOW_FILES = ("Snakefile", "config/config.yaml")
# The options of each workflow command that name files: read from where the command was typed.
PATH_OPTIONS = ("configfile", "ledger", "prices", "results")


def find_workflow(directory: str | None) -> Path:
    """``--directory``, else the nearest folder at or above this one holding the workflow, else
    the checkout memprobe is installed from; else one line saying where it looked."""

    def holds(d: Path) -> bool:
        return all((d / f).is_file() for f in WORKFLOW_FILES)

    if directory is not None:
        if holds(Path(directory)):
            return Path(directory).resolve()
        missing = " or ".join(WORKFLOW_FILES)
        raise ValueError(f"--directory {directory}: no MemProbe workflow there (no {missing})")
    here = Path.cwd()
    for d in (here, *here.parents):
        if holds(d):
            return d
    checkout = Path(__file__).resolve().parents[1]
    if holds(checkout):
        return checkout
    raise ValueError(
        f"no MemProbe workflow ({' and '.join(WORKFLOW_FILES)}) in {here} or any folder above "
        f"it, nor in memprobe's checkout {checkout}; pass --directory"
    )


def enter_workflow(args: argparse.Namespace) -> None:
    """Run the command in the workflow's folder, as ``snakemake`` runs there: the file options
    typed relative to this folder are made absolute first."""
    root = find_workflow(args.directory)
    for name in PATH_OPTIONS:
        value = getattr(args, name, None)
        if isinstance(value, list):
            setattr(args, name, [os.path.abspath(v) for v in value])
        elif isinstance(value, str):
            setattr(args, name, os.path.abspath(value))
    if root != Path.cwd().resolve():
        print(f"memprobe: the workflow in {root}", file=sys.stderr)
        os.chdir(root)


def dump_items(path: str) -> list[dict]:
    """The items of a memories.json: ours, or the release's ``{"num_memories", "memories"}``."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise RecordError(f"{path}: not JSON ({err.msg}, line {err.lineno})") from None
    if isinstance(raw, dict) and "user_id" not in raw and "num_memories" in raw:
        items = raw.get("memories")
        if not isinstance(items, list) or not all(
            isinstance(i, dict) and isinstance(i.get("content"), str) for i in items
        ):
            raise RecordError(f"{path}: memories: expected a list of items with a 'content'")
        return items  # the release's dump (docs/release-format.md §2.7), taken as it is
    return load(path, Memories).memories


def _search(args: argparse.Namespace) -> int:
    from memprobe.registry import systems as registry

    spec = registry.spec(args.system)
    if not spec.searchable:
        raise ValueError(f"--system {spec.name}: it has no search() (dump_all only)")
    if args.memories:
        if spec.name != "longctx_full":
            raise ValueError(
                f"--memories: a dump alone is searchable for longctx_full only (its store is "
                f"its dump); for {spec.name} give its store: --store results/{spec.name}/USER/store"
            )
        from memprobe.agents.longctx import LongContext

        system = LongContext.__new__(LongContext)
        system.load_dump(dump_items(args.memories))
    else:
        system = _open_store(spec.name, Path(args.store), args.configfile)
    if args.queries:
        queries = [q for q in Path(args.queries).read_text(encoding="utf-8").splitlines() if q]
    else:
        queries = [args.query]
    for q in queries:
        print(json.dumps(system.search(q, args.k), ensure_ascii=False))
    return 0


def _open_store(name: str, store: Path, configfiles: list[str]) -> Any:
    """A rollout's store (results/<system>/<user>/store), opened as the probe job opens it but
    without the assistant and writer roles: a search that calls them needs `memprobe job probe`."""
    from memprobe.registry import systems as registry
    from memprobe.report.estimate import load_configs

    if not store.is_dir():
        raise ValueError(f"--store {store}: no such folder (a rollout's results/SYSTEM/USER/store)")
    spec = registry.spec(name)
    system = registry.create(
        name,
        config=load_configs(configfiles),
        assistant=None,
        prompts=spec.prompt_files(),
        workdir=store,
    )
    system.reset(store.parent.name)
    system.load(store)
    return system


def _fake_endpoint(args: argparse.Namespace) -> int:
    from memprobe.testing.fake_endpoint import Faults, Limits, serve
    from memprobe.testing.fake_responder import parse_outcomes

    faults = Faults.parse(args.faults) if args.faults else None
    limits = Limits.parse(args.limits) if args.limits else None
    if args.latency < 0:
        raise ValueError(f"--latency: must be >= 0 seconds (got {args.latency:g})")
    outcomes = parse_outcomes(args.outcomes) if args.outcomes else None
    serve(args.host, args.port, args.script, faults, args.latency, limits, outcomes)
    return 0


def _estimate(args: argparse.Namespace) -> int:
    from memprobe.config import ConfigError
    from memprobe.report import estimate

    try:
        cfg = estimate.load_configs(args.configfile, args.config)
    except ConfigError as err:
        raise ValueError(str(err)) from None
    if args.ledger and not (Path(args.ledger) / "usage").is_dir():
        raise ValueError(
            f"--ledger {args.ledger}: no usage/ ledger there (an earlier run's folder, "
            "results/, a named run's results/<run.name>)"
        )
    from memprobe.workflow import paths

    results = Path(args.ledger or cfg.run_dir)
    # The users' generation is billed in the shared users' folders of this config (docs/runs.md).
    users = [] if args.ledger else sorted({Path(p) for p in paths.of(cfg).users.values()})
    rates = None if args.no_ledger else estimate.observed(results, cfg, users)
    if rates is None:
        rates = estimate.priors(cfg)
        if not args.no_ledger:
            rates.source += f" (no ledger under {results}/usage)"
    if run := cfg.rollout.replay:  # the recorded run's turns, whatever the system
        from memprobe.release import importer

        recorded = importer.recorded_system(run)
        rates = estimate.replayed_turns(cfg, rates, recorded, importer.recorded_turns(cfg))
    latency = args.latency or (None if args.no_ledger else estimate.mean_latency(results))
    prices = estimate.load_prices(args.prices) if args.prices else None
    print(
        estimate.report(
            cfg,
            rates,
            prices,
            latency_s=latency or estimate.assumed_latency(cfg),
            latency_from="given" if args.latency else ("ledger mean" if latency else "assumed"),
            llm_slots=args.llm_slots or estimate.default_llm_slots(),
        )
    )
    return 0


def _local_server(args: argparse.Namespace) -> int:
    from memprobe.config import ConfigError
    from memprobe.serving import local_server

    try:
        local_server.run_foreground(local_server.config_from_files(args.configfile))
    except (local_server.LocalModelError, ConfigError) as err:
        raise ValueError(str(err)) from None
    return 0


def _audit_sample(args: argparse.Namespace) -> int:
    from memprobe.config import ConfigError, load_files
    from memprobe.report import audit

    if args.results is None:
        try:
            args.results = load_files(args.configfile).run_dir
        except ConfigError as err:
            raise ValueError(str(err)) from None
    out = audit.sample(args.results, args.n, args.seed, args.name)
    print(f"{out / 'index.html'}: open it, mark each item, save the sheet as {out}/sheet.csv")
    return 0


def _offline_judge(args: argparse.Namespace) -> int:
    from memprobe.protocol import offline_judge
    from memprobe.release import judge_agreement
    from memprobe.serving.embeddings import encode_local
    from memprobe.spec.records import write_atomic

    if args.offline_command == "fit":
        params = judge_agreement.fit(args.release, args.users, encode_local)
        write_atomic(args.params, offline_judge.params_yaml(params))
        print(f"{args.params}: {params.fitted_on}")
        return 0
    params = offline_judge.load_params(args.params)
    measured = judge_agreement.measure(
        args.release, args.users, args.n, args.seed, params, encode_local
    )
    print(judge_agreement.report(measured))
    return 0


def _job(args: argparse.Namespace) -> int:
    from memprobe.workflow import job

    job.run(job.build(args.rule, job.parse_wildcards(args.wildcards), args.configfile))
    return 0


def _config_reference(args: argparse.Namespace) -> int:
    from memprobe import config_reference
    from memprobe.spec.records import write_atomic

    text = config_reference.render()
    if args.output:
        write_atomic(args.output, text)
    else:
        print(text, end="")
    return 0


def estimate_latency() -> str:
    from memprobe.report.estimate import ASSUMED_LATENCY_S, ASSUMED_LOCAL_LATENCY_S

    return f"{ASSUMED_LATENCY_S:g}, or {ASSUMED_LOCAL_LATENCY_S:g} for the local backend"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memprobe", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    # every option's help ends with its default
    defaults: dict[str, Any] = {"formatter_class": _Help}

    s = sub.add_parser(
        "search",
        help="top-k search over a system's store (any searchable system) or a longctx_full dump",
        **defaults,
    )
    s.add_argument("--system", required=True, help="the store's system (a searchable one)")
    where = s.add_mutually_exclusive_group(required=True)
    where.add_argument("--store", help="a rollout's store: results/SYSTEM/USER/store")
    where.add_argument("--memories", help="a longctx_full memories.json (ours or the release's)")
    s.add_argument(
        "--configfile", nargs="+", default=[], help="the run's config file(s), for --store"
    )
    s.add_argument("--k", type=int, default=5, help="items per query")
    group = s.add_mutually_exclusive_group(required=True)
    group.add_argument("--query", help="one query")
    group.add_argument("--queries", help="file with one query per line")
    s.set_defaults(fn=_search)

    f = sub.add_parser(
        "fake-endpoint", help="deterministic OpenAI-compatible test server", **defaults
    )
    f.add_argument("--host", default="127.0.0.1", help="address to listen on")
    f.add_argument("--port", type=int, default=8765, help="port (0: a free one, printed)")
    f.add_argument("--script", help="JSON file of pinned replies per schema name")
    f.add_argument(
        "--faults",
        help="seeded fault injection, e.g. 'all=0.2,seed=1,hold_s=3,retry_after=1' or "
        "'rate_limit=0.05,server_error=0.05,timeout=0.02,truncated=0.02,malformed=0.02,"
        "bad_content=0.02,schema_invalid=0.02,empty=0.02'",
    )
    f.add_argument(
        "--latency",
        type=float,
        default=0.0,
        help="seconds every chat completion waits before its reply (benchmarks; default 0)",
    )
    f.add_argument(
        "--limits",
        help="a provider's rate limit, e.g. 'rpm=600,tpm=200000' (window_s=60 by default): "
        "429 with Retry-After past it, x-ratelimit-* headers on every reply",
    )
    f.add_argument(
        "--outcomes",
        help="rig enum fields of structured replies, e.g. 'feedback_type=satisfied:0.4,"
        "verdict=neutral:1' (default: every option evenly; benchmarks set the release's rates)",
    )
    f.set_defaults(fn=_fake_endpoint)

    e = sub.add_parser(
        "estimate",
        help="calls, tokens, money and hours of a run, before it starts",
        **defaults,
    )
    e.add_argument(
        "--configfile",
        nargs="+",
        default=[],
        help="config file(s) layered on config/config.yaml, as the Snakefile does",
    )
    e.add_argument("--config", nargs="+", metavar="KEY=VALUE", help="overrides, e.g. top_k=10")
    e.add_argument(
        "--ledger", help="an earlier run's folder (default: this config's, docs/runs.md)"
    )
    e.add_argument("--no-ledger", action="store_true", help="use the paper's priors only")
    e.add_argument("--prices", help="YAML: model: {input: USD, output: USD} per 1M tokens")
    e.add_argument(
        "--latency",
        type=float,
        help=f"seconds per call (default: the ledger's mean, else {estimate_latency()})",
    )
    e.add_argument("--llm-slots", type=int, help="LLM jobs at once (default: profiles/default)")
    e.set_defaults(fn=_estimate)

    loc = sub.add_parser("local-server", help="serve the local GGUF model until Ctrl-C", **defaults)
    loc.add_argument(
        "--configfile", nargs="+", default=[], help="config file(s) layered on config/config.yaml"
    )
    loc.set_defaults(fn=_local_server)

    aud = sub.add_parser("audit", help="human audit of the LLM's labels").add_subparsers(
        dest="audit_command", required=True
    )
    a = aud.add_parser("sample", help="draw a stratified sample and its sheet page", **defaults)
    a.add_argument("--n", type=int, required=True, help="items per label type")
    a.add_argument("--seed", type=int, default=0, help="sampling seed")
    a.add_argument("--name", required=True, help="the sample's folder: <run folder>/audit/NAME")
    a.add_argument(
        "--configfile", nargs="+", default=[], help="the run's config file(s), as for snakemake"
    )
    a.add_argument("--results", help="the run's folder (default: the config's, docs/runs.md)")
    a.set_defaults(fn=_audit_sample)

    oj = sub.add_parser(
        "offline-judge", help="fit or measure the offline judge on the release's verdicts"
    ).add_subparsers(dest="offline_command", required=True)
    for name, users, text in (
        ("fit", "1-25", "refit the figures on these users' recorded judge scores"),
        ("measure", "26-50", "agreement with the recorded scores of these users"),
    ):
        o = oj.add_parser(name, help=text, **defaults)
        o.add_argument("--release", required=True, help="a checkout of the authors' release")
        o.add_argument("--users", default=users, help="user numbers, e.g. 26-50 or 1-10,12")
        o.add_argument("--params", default="config/offline_judge.yaml", help="the figures file")
        if name == "measure":
            o.add_argument("--n", type=int, default=200, help="stratified pairs (n/5 a level)")
            o.add_argument("--seed", type=int, default=0, help="the sample's seed")
        o.set_defaults(fn=_offline_judge)

    j = sub.add_parser(
        "job",
        help="run one job of the workflow by hand, on its real files (inputs must exist)",
        **defaults,
    )
    j.add_argument("rule", help="the rule, e.g. judge")
    j.add_argument("wildcards", nargs="*", help="the job's wildcards, e.g. user=user_001")
    j.add_argument(
        "--configfile", nargs="+", default=[], help="config file(s), as given to snakemake"
    )
    j.set_defaults(fn=_job)

    c = sub.add_parser(
        "config-reference",
        help="the config reference (docs/configuration.md), from the config models",
        **defaults,
    )
    c.add_argument("--output", help="write it here (e.g. docs/configuration.md), not to stdout")
    c.set_defaults(fn=_config_reference)

    for command in (e, loc, a, j):  # the commands that read the workflow's config or its runs
        command.add_argument(
            "--directory",
            "-d",
            help="the workflow's folder (default: the nearest one with a Snakefile at or above "
            "this folder, else memprobe's own checkout)",
        )
    args = parser.parse_args(argv)
    try:
        if "directory" in args:
            enter_workflow(args)
        return args.fn(args)
    except (RecordError, ValueError, OSError) as err:
        print(f"memprobe {args.command}: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
