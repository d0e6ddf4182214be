from pathlib import Path

from memprobe.agents import registry

from memprobe.protocol import records, recovery, taxonomy
from memprobe.workflow import glue


def main(job: glue.Job) -> None:
    name = job.wildcards.system
    spec = registry.spec(name)
    system = registry.create(
        name,
        config=job.cfg,
        assistant=job.llm("assistant"),
        writer=job.llm("writer") if spec.llm_writer else None,
        prompts=glue.prompt_inputs(job),
        workdir=Path(job.input.store),
    )
    system.reset(job.wildcards.user)
    system.load(Path(job.input.store))
    retrieved = recovery.probe(
        system,
        records.load(job.input.bank, records.Bank),
        taxonomy.load_guides(job.input.guides),
        int(job.wildcards.k),
        job.wildcards.user,
    )
    records.write_atomic(job.output[0], retrieved)


glue.run(main)
