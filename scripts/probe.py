from pathlib import Path

from memprobe.protocol import probe
from memprobe.spec import records, taxonomy
from memprobe.workflow import step


def main(job: step.Job) -> None:
    system = job.memory_system(Path(job.input.store))
    system.reset(job.wildcards.user)
    system.load(Path(job.input.store))
    retrieved = probe.probe(
        system,
        records.load(job.input.bank, records.Bank),
        taxonomy.load_guides(job.input.guides),
        int(job.wildcards.k),
        job.wildcards.user,
    )
    records.write_atomic(job.output[0], retrieved)


step.run(main)
