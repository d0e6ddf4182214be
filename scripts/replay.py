"""One user's recorded conversations (``rollout.replay``: the release's run) through one memory
system's write hooks, with no simulator, assistant or preference call (rule replay). Its own
script, so that what only a replay reads (the release importer) never reruns a live rollout."""

from pathlib import Path

from memprobe.protocol import simulation
from memprobe.release import importer
from memprobe.release.layout import Layout
from memprobe.spec import records
from memprobe.workflow import step


def recorded(job: step.Job, tasks: records.Tasks) -> records.Episodes:
    """The recorded episodes of the replayed run, one file per task, in task order."""
    lay, files = Layout(job.cfg), list(job.input.recorded)
    eps = [importer.replayable(lay, Path(f), t) for f, t in zip(files, tasks.tasks, strict=True)]
    return records.Episodes(user_id=tasks.user_id, system=job.cfg.rollout.replay, episodes=eps)


def main(job: step.Job) -> None:
    store = Path(job.output.store)
    system = job.memory_system(store)
    run = job.cfg.rollout.replay
    assert run, "the replay rule exists only with rollout.replay"
    tasks = records.load(job.input.tasks, records.Tasks)
    episodes = simulation.replay(system, recorded(job, tasks), run)
    system.save(store)
    memories = simulation.memories_record(system, job.wildcards.user, job.wildcards.system)
    records.write_atomic(job.output.episodes, episodes)
    records.write_atomic(job.output.memories, memories)


step.run(main)
