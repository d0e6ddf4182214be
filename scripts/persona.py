from memprobe.protocol import persona
from memprobe.spec import records
from memprobe.workflow import step


def main(job: step.Job) -> None:
    made = persona.make_persona(
        job.cfg.seed, job.wildcards.user, job.llm("generator"), job.input.prompt
    )
    records.write_atomic(job.output[0], made)


step.run(main)
