from memprobe.protocol import tasks
from memprobe.spec import records, taxonomy
from memprobe.workflow import step


def main(job: step.Job) -> None:
    made = tasks.make_tasks(
        records.load(job.input.persona, records.Persona),
        records.load(job.input.bank, records.Bank),
        taxonomy.load_guides(job.input.guides),
        {role: job.llm(role) for role in ("task_writer", "critic", "editor")},
        {"write": job.input.write, "critic": job.input.critic, "edit": job.input.edit},
        max_edits=job.cfg.tasks.max_edits,
        leak_threshold=job.cfg.tasks.leak_threshold,
        hints=taxonomy.load_guides(job.input.hints),
    )
    records.write_atomic(job.output[0], made)


step.run(main)
