from memprobe.protocol import users
from memprobe.spec import records
from memprobe.workflow import step


def main(job: step.Job) -> None:
    persona = users.make_persona(
        job.cfg.seed, job.wildcards.user, job.llm("generator"), job.input.prompt
    )
    records.write_atomic(job.output[0], persona)


step.run(main)
