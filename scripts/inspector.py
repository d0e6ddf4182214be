"""The case inspector site (memprobe/report/inspect_site.py). Not named inspect.py: that would
shadow the standard library module for every script run from scripts/."""

from memprobe.report import inspect_site
from memprobe.workflow import step


def main(job: step.Job) -> None:
    p = job.smk.params
    summary = inspect_site.build(
        job.cfg.run_dir,
        job.output.site,
        list(p.users),
        list(p.systems),
        p.pairs,
        p.k,
        run=job.cfg.run.name,
        compared=list(p.compared),
    )
    inspect_site.write_entry(job.output.entry, summary)


step.run(main)
