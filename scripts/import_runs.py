"""Every run record of one user, for every configured system and mode, from the release."""

from memprobe.release import importer as release
from memprobe.release.layout import Layout
from memprobe.spec import records
from memprobe.workflow import step


def main(job: step.Job) -> None:
    lay = Layout(job.cfg)
    user, out = job.wildcards.user, job.output
    bank = records.load(job.input.bank, records.Bank)
    tasks = records.load(job.input.tasks, records.Tasks)
    records.write_atomic(out.oracle, release.oracle(lay, user))
    stores = {}
    for i, system in enumerate(job.smk.params.systems):
        stores[system] = release.memories(lay, system, user)
        records.write_atomic(out.episodes[i], release.episodes(lay, system, user, tasks))
        records.write_atomic(out.memories[i], stores[system])
        records.write_atomic(out.preference[i], release.preference(lay, system, user, tasks))
    for i, (system, mode) in enumerate(job.smk.params.pairs):
        slot, judge = release.scores(lay, system, mode, user, bank, stores[system])
        records.write_atomic(out.slotfill[i], slot)
        records.write_atomic(out.judge[i], judge)
        records.write_atomic(out.attribution[i], release.attribution(lay, system, mode, user))


step.run(main)
