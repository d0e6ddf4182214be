"""One user's rollout through one memory system: live (rule rollout: the simulator and the
assistant hold the conversation) or replayed (rule replay, ``rollout.replay``: the release's
recorded conversation, through the same write hooks)."""

from pathlib import Path

from memprobe.protocol import simulation
from memprobe.spec import records
from memprobe.workflow import step


def recorded(job: step.Job, tasks: records.Tasks) -> records.Episodes:
    """The recorded episodes of the replayed run, one file per task, in task order."""
    from memprobe.release import importer

    lay, files = importer.Layout(job.cfg), list(job.input.recorded)
    eps = [importer.replayable(lay, Path(f), t) for f, t in zip(files, tasks.tasks, strict=True)]
    return records.Episodes(user_id=tasks.user_id, system=job.cfg.rollout.replay, episodes=eps)


def main(job: step.Job) -> None:
    store = Path(job.output.store)
    system = job.memory_system(store)
    tasks = records.load(job.input.tasks, records.Tasks)
    if job.rule == "replay":
        run = job.cfg.rollout.replay
        assert run, "the replay rule exists only with rollout.replay"
        episodes = simulation.replay(system, recorded(job, tasks), run)
    else:
        episodes = simulation.rollout(
            system,
            job.llm("simulator"),
            job.input.simulator_prompt,
            records.load(job.input.persona, records.Persona),
            records.load(job.input.bank, records.Bank),
            tasks,
            job.cfg.max_turns,
            job.cfg.simulator.max_reply_chars,
        )
    system.save(store)
    items = system.get_all_memories()
    memories = records.Memories(
        user_id=job.wildcards.user,
        system=job.wildcards.system,
        num_memories=len(items),
        memories=items,
        meta=system.meta(),
    )
    records.write_atomic(job.output.episodes, episodes)
    records.write_atomic(job.output.memories, memories)


step.run(main)
