from memprobe.protocol import records, users
from memprobe.workflow import glue


def main(job: glue.Job) -> None:
    persona = users.make_persona(
        job.cfg.seed, job.wildcards.user, job.llm("generator"), job.input.prompt
    )
    records.write_atomic(job.output[0], persona)


glue.run(main)
