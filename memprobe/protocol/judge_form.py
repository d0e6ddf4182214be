"""The run's judge form (``judge.form``), for the judge rule and the calibration alike.

``llm``: the judge role's model, asked with prompts/recovery_judge.md. ``scorer``: the
offline judge (memprobe/protocol/offline_judge.py), which needs no model and grades a label
that only names its slot as 0 (it reads the pool's axis questions for that).
"""

from __future__ import annotations

from collections.abc import Callable

from memprobe.config.schema import Config
from memprobe.llm.client import LLM
from memprobe.protocol import judge
from memprobe.spec import taxonomy
from memprobe.spec.records import StandIn


def offline(cfg: Config, pool: str | None) -> judge.Grader:
    from memprobe.protocol import offline_judge

    if pool is None:
        raise ValueError("the offline judge needs the pool's axis questions (no pool input)")
    return offline_judge.grader(
        offline_judge.load_params(cfg.judge.scorer),
        taxonomy.run_pool(cfg, pool).axes(),
    )


def grader(
    cfg: Config,
    llm: Callable[[], LLM],
    prompt: str | None,
    pool: str | None,
    stand_ins: list[StandIn],
) -> judge.Grader:
    """The configured judge; ``llm`` builds the judge role's client (only ``form: llm``), whose
    stand-ins go to ``stand_ins`` (the offline judge has none)."""
    if cfg.judge.form == "scorer":
        return offline(cfg, pool)
    if prompt is None:
        raise ValueError("an LLM judge needs its prompt file (no prompt input)")
    return judge.llm_grader(llm(), prompt, stand_ins)


def second_opinion(cfg: Config, pool: str | None) -> judge.Grader | None:
    """``judge.cross_check``: the offline judge beside an LLM judge."""
    return offline(cfg, pool) if cfg.judge.cross_check else None
