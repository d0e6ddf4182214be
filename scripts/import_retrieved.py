from memprobe.release import importer as release
from memprobe.release.layout import Layout
from memprobe.spec import records, taxonomy
from memprobe.workflow import step


def main(job: step.Job) -> None:
    result = release.retrieved(
        Layout(job.cfg),
        job.wildcards.system,
        job.wildcards.user,
        int(job.wildcards.k),
        taxonomy.load_guides(job.input.guides),
    )
    records.write_atomic(job.output[0], result)


step.run(main)
