from memprobe.release import importer as release
from memprobe.spec import records
from memprobe.workflow import step


def main(job: step.Job) -> None:
    user = job.wildcards.user
    bank = release.bank(job.input.bank_file, user, job.cfg.dims_per_category)
    tasks = release.tasks(job.input.task_file, user, bank)
    persona = release.persona(job.input.bank_file, user)
    records.write_atomic(job.output.persona, persona)
    records.write_atomic(job.output.bank, bank)
    records.write_atomic(job.output.tasks, tasks)


step.run(main)
