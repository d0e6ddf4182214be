# The case inspector (memprobe/report/inspect_site.py): a static site from the per-user files only,
# R/inspect/index.html plus one page per (user, dimension). R/inspect.html is its
# entry in `snakemake --report`; the caption links the site itself.
import glob
from pathlib import Path

from memprobe.report import inspect_site

INSPECT_RETRIEVED = [
    f"{R}/{s}/{u}/retrieved_k{K}.json" for s in RETRIEVE_SYSTEMS for u in USERS
]


rule inspector:
    input:
        bank=expand(run_user("bank"), user=USERS),
        tasks=expand(run_user("tasks"), user=USERS),
        episodes=expand(
            f"{R}/{{system}}/{{user}}/episodes.json", system=SYSTEMS, user=USERS
        ),
        memories=MEMORIES,
        retrieved=INSPECT_RETRIEVED,
        slotfill=[f"{R}/{s}/{u}/{m}/slotfill.json" for s, m in PAIRS for u in USERS],
        judge=JUDGES,
        attribution=ATTRIBUTIONS,
        assets=inspect_site.asset_files(),
        lib=library("inspector"),
        compared=[f for c in COMPARED for f in c.judge_files],  # compare.runs
    output:
        site=directory(f"{R}/inspect"),
        entry=report(
            f"{R}/inspect.html",
            caption="captions/inspect.rst",
            category="Inspector",
        ),
    log:
        job_log("inspector", "inspector"),
    localrule: True
    conda:
        "../envs/memprobe.yaml"
    params:
        **settings("inspector"),
        users=USERS,
        systems=SYSTEMS,
        pairs=PAIRS,
        k=K,
        compared=[c.param() for c in COMPARED],
    script:
        "../scripts/inspector.py"


# Human audit (memprobe/report/audit.py): `memprobe audit sample` draws a sample into
# R/audit/NAME/ (R: the run's folder); the sheets a person saves there become one agreement table.
AUDIT_SHEETS = sorted(glob.glob(f"{R}/audit/*/sheet*.csv"))


rule audit_agreement:
    input:
        sheets=AUDIT_SHEETS,
        # A sheet without its sample is the script's one-line error, not a missing input.
        samples=sorted(
            {
                str(Path(s).with_name("items.json"))
                for s in AUDIT_SHEETS
                if Path(s).with_name("items.json").exists()
            }
        ),
        lib=library("audit_agreement"),
    output:
        f"{R}/audit/agreement.csv",
    log:
        job_log("audit_agreement", "agreement"),
    localrule: True
    conda:
        "../envs/memprobe.yaml"
    params:
        **settings("audit_agreement"),
        seed=CFG.seed,
    script:
        "../scripts/audit_agreement.py"
