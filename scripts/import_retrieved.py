from memprobe.protocol import records, taxonomy
from memprobe.release import importer as release
from memprobe.workflow import glue


def main(job: glue.Job) -> None:
    result = release.retrieved(
        release.Layout(job.cfg),
        job.wildcards.system,
        job.wildcards.user,
        int(job.wildcards.k),
        taxonomy.load_guides(job.input.guides),
    )
    records.write_atomic(job.output[0], result)


glue.run(main)
