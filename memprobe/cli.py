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
        if not spec.dump_is_store:
            dumps = [s for s in registry.system_names() if registry.spec(s).dump_is_store]
            raise ValueError(
                f"--memories: a dump alone is searchable for a system whose store is its dump "
                f"({', '.join(dumps)}); for {spec.name} give its store: --store "
                f"results/{spec.name}/USER/store"
            )
        system = registry.bare(spec.name)  # no config, no LLM: its store is the dump
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
    from memprobe.config.base import ConfigError
    from memprobe.report import estimate, estimate_rates, estimate_time

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
    rates = None if args.no_ledger else estimate_rates.observed(results, cfg, users)
    if rates is None:
        rates = estimate_rates.priors(cfg)
        if not args.no_ledger:
            rates.source += f" (no ledger under {results}/usage)"
    if run := cfg.rollout.replay:  # the recorded run's turns, whatever the system
        from memprobe.release import layout

        recorded = layout.recorded_system(run)
        rates = estimate_rates.replayed_turns(cfg, rates, recorded, layout.recorded_turns(cfg))
    latency = args.latency or (None if args.no_ledger else estimate_time.mean_latency(results))
    prices = estimate_time.load_prices(args.prices) if args.prices else None
    print(
        estimate.report(
            cfg,
            rates,
            prices,
            latency_s=latency or estimate.assumed_latency(cfg),
            latency_from="given" if args.latency else ("ledger mean" if latency else "assumed"),
            llm_slots=args.llm_slots or estimate_time.default_llm_slots(),
        )
    )
    return 0


def _local_server(args: argparse.Namespace) -> int:
    from memprobe.config.base import ConfigError
    from memprobe.serving import local_model, local_server

    try:
        local_server.run_foreground(local_server.config_from_files(args.configfile))
    except (local_model.LocalModelError, ConfigError) as err:
        raise ValueError(str(err)) from None
    return 0


def _audit_sample(args: argparse.Namespace) -> int:
    from memprobe.config.base import ConfigError
    from memprobe.config.loading import load_files
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

    if args.offline_command == "variants":
        print(judge_agreement.VARIANTS_HEADER, flush=True)
        rows = judge_agreement.variants(
            args.release,
            encode_local,
            args.users,
            args.measure_users,
            n=args.n,
            seed=args.seed,
            progress=lambda line: print(line, flush=True),
        )
        print(f"best cross-validated: {judge_agreement.best(rows).variant.name}")
        return 0
    if args.offline_command == "fit":
        params = judge_agreement.fit(args.release, args.users, encode_local)
        if args.measure_users:
            measured = judge_agreement.measure(
                args.release, args.measure_users, args.n, args.seed, params, encode_local
            )
            params.measured = measured.agreement()
            print(judge_agreement.report(measured))
        write_atomic(args.params, offline_judge.params_yaml(params))
        print(f"{args.params}: {params.fitted_on}")
        return 0
    params = offline_judge.load_params(args.params)
    measured = judge_agreement.measure(
        args.release, args.users, args.n, args.seed, params, encode_local
    )
    print(judge_agreement.report(measured))
    return 0


def _shared_words(args: argparse.Namespace) -> int:
    from memprobe.release import shared_words as sw
    from memprobe.spec.records import write_atomic

    if bool(args.release) == bool(args.hashes):
        raise ValueError("give the release (--release DIR) or its stored hashes (--hashes FILE)")
    if args.release:
        known, where = sw.release_hashes(args.release, args.words), f"{args.release}'s code strings"
    else:
        known, where = sw.read_hashes(args.hashes), f"the release strings hashed in {args.hashes}"
    if args.write_hashes:
        write_atomic(args.write_hashes, sw.hashes_file(known, args.words))
        print(f"{args.write_hashes}: {len(known)} hashes of {args.words}-word runs")
    shared = sw.shared_runs(sw.prompt_texts(args.prompts), known, args.words)
    print(sw.report(shared, args.words, where))
    return 1 if shared else 0


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


def configfile_option(command: argparse.ArgumentParser, text: str) -> None:
    """``--configfile`` as Snakemake takes it: several files after one flag, or the flag
    repeated; every file counts, in the order given (a later one wins key by key)."""
    command.add_argument(
        "--configfile", nargs="+", action="extend", default=[], help=f"{text} (repeatable)"
    )


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
    configfile_option(s, "the run's config file(s), for --store")
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
    f.add_argument(
        "--script",
        help="JSON file of pinned replies: {role: [reply, ...]} in order, or {role: {when: "
        "[[[text, ...], reply], ...], else: reply}} by what the request says (docs/testing.md, "
        '"The fake endpoint")',
    )
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
    configfile_option(e, "config file(s) layered on config/config.yaml, as the Snakefile does")
    e.add_argument(
        "--config",
        nargs="+",
        action="extend",
        metavar="KEY=VALUE",
        help="overrides, e.g. top_k=10 (repeatable)",
    )
    e.add_argument(
        "--ledger", help="an earlier run's folder (default: this config's, docs/runs.md)"
    )
    e.add_argument("--no-ledger", action="store_true", help="use the paper's priors only")
    e.add_argument("--prices", help="YAML: model: {input: USD, output: USD} per 1M tokens")
    e.add_argument(
        "--latency",
        type=float,
        help="seconds per call (default: the ledger's mean, else the backend's assumed latency, "
        "printed with the estimate)",
    )
    e.add_argument("--llm-slots", type=int, help="LLM jobs at once (default: profiles/default)")
    e.set_defaults(fn=_estimate)

    loc = sub.add_parser("local-server", help="serve the local GGUF model until Ctrl-C", **defaults)
    configfile_option(loc, "config file(s) layered on config/config.yaml")
    loc.set_defaults(fn=_local_server)

    aud = sub.add_parser("audit", help="human audit of the LLM's labels").add_subparsers(
        dest="audit_command", required=True
    )
    a = aud.add_parser("sample", help="draw a stratified sample and its sheet page", **defaults)
    a.add_argument("--n", type=int, required=True, help="items per label type")
    a.add_argument("--seed", type=int, default=0, help="sampling seed")
    a.add_argument("--name", required=True, help="the sample's folder: <run folder>/audit/NAME")
    configfile_option(a, "the run's config file(s), as for snakemake")
    a.add_argument("--results", help="the run's folder (default: the config's, docs/runs.md)")
    a.set_defaults(fn=_audit_sample)

    oj = sub.add_parser(
        "offline-judge", help="fit, measure or compare variants of the offline judge"
    ).add_subparsers(dest="offline_command", required=True)
    for name, text in (
        ("fit", "refit the figures on --users, measure them on --measure-users"),
        ("measure", "agreement with the recorded scores of --users"),
        ("variants", "fit every variant on --users, measure it on --measure-users"),
    ):
        o = oj.add_parser(name, help=text, **defaults)
        o.add_argument("--release", required=True, help="a checkout of the authors' release")
        o.add_argument(
            "--users",
            default="26-50" if name == "measure" else "1-25",
            help="user numbers, e.g. 26-50 or 1-10,12",
        )
        if name != "measure":
            o.add_argument(
                "--measure-users",
                default="26-50",
                help="the users it is measured on" + ("; '' to skip" if name == "fit" else ""),
            )
        if name != "variants":
            o.add_argument("--params", default="config/offline_judge.yaml", help="the figures file")
        o.add_argument("--n", type=int, default=200, help="stratified pairs (n/5 a level)")
        o.add_argument("--seed", type=int, default=0, help="the stratified draw's seed")
        o.set_defaults(fn=_offline_judge)

    w = sub.add_parser(
        "shared-words",
        help="runs of words the prompt files share with the release's code strings (exit 1 if any)",
        **defaults,
    )
    w.add_argument("--release", help="a checkout of the authors' release")
    w.add_argument("--hashes", help="instead of the release: its runs' stored hashes")
    w.add_argument("--prompts", default="prompts", help="the prompt files' folder")
    w.add_argument("--words", type=int, default=12, help="the shortest run that counts")
    w.add_argument("--write-hashes", help="also write the release runs' hashes to this file")
    w.set_defaults(fn=_shared_words)

    j = sub.add_parser(
        "job",
        help="run one job of the workflow by hand, on its real files (inputs must exist)",
        **defaults,
    )
    j.add_argument("rule", help="the rule, e.g. judge")
    j.add_argument("wildcards", nargs="*", help="the job's wildcards, e.g. user=user_001")
    configfile_option(j, "config file(s), as given to snakemake")
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
