"""The deadline in force: what a backend call may take, and which deadline wins when nested."""

from __future__ import annotations

import threading

import pytest

from suli.deadline import Deadline, in_force, time_left
from suli.errors import DeadlineExceeded


def test_without_a_deadline_in_force_a_call_gets_the_default() -> None:
    assert in_force() is None
    assert time_left(10.0) == 10.0


def test_a_call_gets_what_is_left_of_the_deadline_in_force() -> None:
    with Deadline(2.0).in_force():
        assert 1.5 < time_left(10.0) <= 2.0
        assert time_left(0.5) == 0.5  # a shorter default stays
    assert in_force() is None


def test_a_passed_deadline_refuses_the_call() -> None:
    with Deadline(-1.0).in_force(), pytest.raises(DeadlineExceeded):
        time_left(10.0)


def test_the_sooner_deadline_wins_when_nested() -> None:
    outer = Deadline(1.0)
    with outer.in_force(), Deadline(30.0).in_force() as chosen:
        assert chosen is outer and in_force() is outer
        assert time_left(10.0) <= 1.0
    with Deadline(30.0).in_force(), Deadline(1.0).in_force():
        assert time_left(10.0) <= 1.0


def test_run_puts_it_in_force_in_another_thread() -> None:
    seen: list[float] = []
    deadline = Deadline(3.0)
    t = threading.Thread(target=deadline.run, args=(lambda: seen.append(time_left(10.0)),))
    t.start()
    t.join()
    assert len(seen) == 1 and seen[0] <= 3.0
