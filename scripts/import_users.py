from memprobe.release import importer as release
from memprobe.release.layout import Layout
from memprobe.spec import records
from memprobe.workflow import step


def main(job: step.Job) -> None:
    user, lay = job.wildcards.user, Layout(job.cfg)  # its inputs: lay's bank and task files
    bank = release.bank(lay, user, job.cfg.dims_per_category)
    tasks = release.tasks(lay, user, bank)
    persona = release.persona(lay, user)
    records.write_atomic(job.output.persona, persona)
    records.write_atomic(job.output.bank, bank)
    records.write_atomic(job.output.tasks, tasks)


step.run(main)
