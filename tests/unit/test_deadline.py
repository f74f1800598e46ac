"""The deadline in force: which one the work sees, which wins when nested, what is left of it."""

from __future__ import annotations

import threading

import pytest

from suli.deadline import Deadline, in_force
from suli.errors import DeadlineExceeded


def test_without_a_deadline_none_is_in_force() -> None:
    assert in_force() is None
    with Deadline(5.0).in_force():
        assert in_force() is not None
    assert in_force() is None  # put back on leaving


def test_what_is_left_counts_down_from_the_budget() -> None:
    deadline = Deadline(2.0)
    with deadline.in_force() as chosen:
        assert chosen is deadline and in_force() is deadline
        assert 1.5 < deadline.left() <= 2.0
        assert 1.5 < deadline.remaining() <= 2.0


def test_a_passed_deadline_refuses_more_work_but_left_never_raises() -> None:
    passed = Deadline(-1.0)
    assert passed.left() < 0
    with pytest.raises(DeadlineExceeded, match="deadline of -1s"):
        passed.remaining()


def test_the_sooner_deadline_wins_when_nested() -> None:
    outer = Deadline(1.0)
    with outer.in_force(), Deadline(30.0).in_force() as chosen:
        assert chosen is outer and in_force() is outer
    inner = Deadline(1.0)
    with Deadline(30.0).in_force(), inner.in_force() as chosen:
        assert chosen is inner and in_force() is inner


def test_run_puts_it_in_force_in_another_thread() -> None:
    seen: list[Deadline | None] = []
    deadline = Deadline(3.0)
    t = threading.Thread(target=deadline.run, args=(lambda: seen.append(in_force()),))
    t.start()
    t.join()
    assert seen == [deadline]
    assert in_force() is None  # this thread never had it
