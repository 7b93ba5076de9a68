"""Turns at the costing workers: first come, first served (tokens/turns.py)."""

from __future__ import annotations

import threading

import pytest

from rms_duck.tokens.turns import Turns

from .conftest import wait_until_queued


def test_callers_get_their_turns_in_the_order_they_came():
    """A plain lock gave the next turn to whichever thread woke first: a multi-threaded
    GROUP BY took it back again and again while another call waited seconds."""
    turns = Turns()
    first = turns.take()
    order: list[int] = []

    def caller(n: int) -> None:
        token = turns.take()
        order.append(n)
        turns.done(token)

    threads = []
    for n in range(6):
        threads.append(threading.Thread(target=caller, args=(n,), daemon=True))
        threads[-1].start()
        wait_until_queued(turns, n + 2)  # each joins the queue before the next starts
    turns.done(first)
    for thread in threads:
        thread.join(30)
    assert order == list(range(6))
    assert turns.ahead() == 0


def test_a_caller_that_may_wait_behind_so_many_gets_none_beyond_that():
    turns = Turns()
    holder = turns.take(behind=0)  # nobody ahead
    assert holder is not None
    assert turns.take(behind=0) is None  # the holder is ahead
    waiting = threading.Thread(target=lambda: turns.done(turns.take(behind=1)), daemon=True)
    waiting.start()
    wait_until_queued(turns, 2)  # behind the holder alone: it waits
    assert turns.take(behind=1) is None  # the holder and a waiting caller are ahead
    assert turns.ahead() == 2
    turns.done(holder)
    waiting.join(30)
    assert not waiting.is_alive() and turns.ahead() == 0


def test_a_caller_interrupted_while_waiting_leaves_the_queue(monkeypatch):
    """Ctrl-C while waiting for a turn left its place in the queue: every caller after it
    would then wait for ever."""
    turns = Turns()
    holder = turns.take()

    def interrupted(timeout=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(turns._changed, "wait", interrupted)  # this queue's waits only
    with pytest.raises(KeyboardInterrupt):
        turns.take()
    monkeypatch.undo()
    assert turns.ahead() == 1
    turns.done(holder)
    assert turns.ahead() == 0
    assert turns.take(behind=0) is not None


def test_ending_a_turn_that_is_not_the_current_one_changes_nothing():
    turns = Turns()
    holder = turns.take()
    turns.done(object())
    assert turns.ahead() == 1
    turns.done(holder)
    turns.done(holder)  # twice: the second is a no-op
    assert turns.ahead() == 0
