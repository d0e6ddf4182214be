"""longctx_full: the notes it keeps, the conversation it replays, and the release's quirk."""

from __future__ import annotations

import pytest
from memprobe.agents.longctx import LongContext

from memprobe.config.loading import load_config
from memprobe.llm.client import client_for
from memprobe.spec.records import Episodes
from tests.helpers.endpoint import record_requests
from tests.helpers.paper import paper_config
from tests.helpers.release_fixture import longctx_items, release_users_config
from tests.helpers.workflow import tiny_config

HISTORY = [
    {"agent": "Which city?", "user": "Lisbon, in May."},
    {"agent": "Here is a plan.", "user": "Great, thanks."},
]


def system(drop_final_reply: bool = False) -> LongContext:
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["longctx_full"])
    raw["compat"] = {"longctx_drop_final_reply": drop_final_reply}
    s = LongContext(config=load_config(raw), assistant=None)  # type: ignore[arg-type]
    s.reset("user_001")
    s.end_episode(1, "Plan a trip", [dict(h) for h in HISTORY])
    s.end_episode(2, "Fix my CV", [{"agent": "Send it over.", "user": "Attached."}])
    return s


def test_notes_are_task_agent_user_lines_in_order():
    notes = system().get_all_memories()
    assert [(n["category"], n["content"], n.get("turn")) for n in notes] == [
        ("task", "[Task 1] Plan a trip", None),
        ("agent_reply", "Agent: Which city?", 1),
        ("user_reply", "User: Lisbon, in May.", 1),
        ("agent_reply", "Agent: Here is a plan.", 2),
        ("user_reply", "User: Great, thanks.", 2),
        ("task", "[Task 2] Fix my CV", None),
        ("agent_reply", "Agent: Send it over.", 1),
        ("user_reply", "User: Attached.", 1),
    ]
    assert {n["task_index"] for n in notes[:5]} == {1} and notes[5]["task_index"] == 2


def test_replay_is_every_earlier_turn_verbatim():
    assert system().prior(3) == [
        {"role": "user", "content": "Plan a trip"},
        {"role": "assistant", "content": "Which city?"},
        {"role": "user", "content": "Lisbon, in May."},
        {"role": "assistant", "content": "Here is a plan."},
        {"role": "user", "content": "Great, thanks."},
        {"role": "user", "content": "Fix my CV"},
        {"role": "assistant", "content": "Send it over."},
        {"role": "user", "content": "Attached."},
    ]


def test_compat_drops_each_tasks_final_reply_from_notes_and_replay():
    s = system(drop_final_reply=True)
    contents = [n["content"] for n in s.get_all_memories()]
    assert "Agent: Here is a plan." not in contents and "Agent: Send it over." not in contents
    assert "Agent: Which city?" in contents and "User: Great, thanks." in contents
    replay = [m["content"] for m in s.prior(3)]
    assert replay == [
        "Plan a trip",
        "Which city?",
        "Lisbon, in May.",
        "Great, thanks.",
        "Fix my CV",
        "Attached.",
    ]


def test_save_and_load_keep_notes_and_replay(tmp_path):
    s = system()
    s.save(tmp_path / "store")
    other = LongContext(config=s.config, assistant=None)  # type: ignore[arg-type]
    other.reset("user_001")
    other.load(tmp_path / "store")
    assert other.get_all_memories() == s.get_all_memories()
    assert other.prior(3) == s.prior(3)


def test_paper_longctx_reply_has_no_tailoring_line(endpoint, tmp_path):
    from memprobe.agents.longctx import LongContext

    seen = record_requests(endpoint)
    for cfg, tailored in (
        (load_config({**tiny_config(endpoint.base_url), "llm": {
            **tiny_config(endpoint.base_url)["llm"], "cache_dir": str(tmp_path / "c1")}}), True),
        (paper_config(endpoint.base_url, tmp_path), False),
    ):  # fmt: skip
        system = LongContext(config=cfg, assistant=client_for("assistant", cfg))
        system.reset("user_001")
        system.respond(1, "Help me plan a kayak trip.", [])
        assert ("Tailor your help to this person" in seen[""][-1]["messages"][0]["content"]) is (
            tailored
        )


@pytest.mark.parametrize("drop_final_reply", [False, True])
def test_a_replayed_run_is_stored_turn_for_turn(drop_final_reply):
    # The fixture's recorded longctx conversation of user_002, through the replay's hooks.
    from memprobe.protocol import simulation
    from memprobe.release import importer, layout

    run = "longctx_full_pooled_50"
    cfg = load_config(
        release_users_config(
            "http://127.0.0.1:9/v1",
            systems=["longctx_full"],
            rollout={"replay": run},
            compat={"longctx_drop_final_reply": drop_final_reply},
        )
    )
    lay = layout.Layout(cfg)
    bank = importer.bank(lay, "user_002", cfg.dims_per_category)
    tasks = importer.tasks(lay, "user_002", bank)
    eps = [importer.replayable(lay, lay.recorded(run, "user_002", t.index), t) for t in tasks.tasks]
    s = LongContext(config=cfg, assistant=None)  # type: ignore[arg-type]
    simulation.replay(s, Episodes(user_id="user_002", system=run, episodes=eps), run)
    assert s.get_all_memories() == longctx_items(run, "user_002", drop_final_reply)
