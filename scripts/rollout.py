"""One user's rollout through one memory system: the simulator and the assistant hold the
conversation (rule rollout; a replay of a recorded one is scripts/replay.py)."""

from pathlib import Path

from memprobe.protocol import simulation
from memprobe.spec import records
from memprobe.workflow import step


def main(job: step.Job) -> None:
    store = Path(job.output.store)
    system = job.memory_system(store)
    episodes = simulation.rollout(
        system,
        job.llm("simulator"),
        job.input.simulator_prompt,
        records.load(job.input.persona, records.Persona),
        records.load(job.input.bank, records.Bank),
        records.load(job.input.tasks, records.Tasks),
        job.cfg.max_turns,
        job.cfg.simulator.max_reply_chars,
    )
    system.save(store)
    memories = simulation.memories_record(system, job.wildcards.user, job.wildcards.system)
    records.write_atomic(job.output.episodes, episodes)
    records.write_atomic(job.output.memories, memories)


step.run(main)
