"""The leak measure (memprobe/protocol/leaks.py): the share of a target's words its task repeats."""

from __future__ import annotations

from memprobe.protocol.leaks import leak_share


def test_leak_share_counts_echoed_target_words():
    short = "budgets every expense in a spreadsheet"
    assert leak_share("Can you help me plan a birthday party?", short) == 0.0
    # budgeting ~ budgets, spreadsheet: 2 of 3 content words (budget, expense, spreadsheet).
    assert leak_share("Help me with budgeting in my spreadsheet", short) == round(2 / 3, 4)
