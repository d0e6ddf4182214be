"""The paper's protocol stages, above the LLM layer and the memory systems: simulated users,
rollouts, preference, recovery (slot-fill and judge), attribution and judge calibration, on the
records, prompts, rubric and taxonomy of ``memprobe.spec``."""
