"""Items made in order on two cores: a thread of their own and the caller's
(``nsysprobe/common/ahead.py``)."""

from __future__ import annotations

import threading
import time

import pytest

from nsysprobe.common.ahead import DEPTH, in_order, waited

AHEAD = "nsysprobe-ahead"


def _prepared(n: int, made: list, fail_at: int | None = None, slow: str | None = None):
    """prepare() for ``in_order``: head "head", n items; ``made`` gets (index, thread) of
    each; index ``fail_at`` raises; the thread named ``slow`` takes 5 ms an item."""

    def make(k: int) -> int:
        name = threading.current_thread().name
        if k == fail_at:
            raise ValueError(f"item {k}")
        if name == slow:
            time.sleep(0.005)
        made.append((k, name))
        return k

    def prepare():
        made.append(("prepare", threading.current_thread().name))
        return "head", n, make

    return prepare


def test_the_items_come_in_order_each_made_once_by_one_of_the_two_threads():
    made: list = []
    with in_order(_prepared(200, made, slow=AHEAD)) as items:
        got = list(items)
    assert got == ["head", *range(200)]
    assert made[0] == ("prepare", AHEAD)
    indexes = sorted(k for k, _ in made[1:])
    assert indexes == list(range(200))  # each made once
    by = {name for _, name in made[1:]}
    assert by == {AHEAD, "MainThread"}  # the caller took some while the thread was slow
    for name in by:  # each thread took its indexes in increasing order
        mine = [k for k, who in made[1:] if who == name]
        assert mine == sorted(mine)


def test_the_thread_is_at_most_depth_items_ahead_of_the_caller():
    made: list = []
    ahead_by = []
    with in_order(_prepared(50, made)) as items:
        assert next(items) == "head"
        for got, i in enumerate(items, start=1):
            time.sleep(0.002)  # a slow caller: the thread runs ahead as far as it may
            ahead_by.append(max(k for k, _ in made[1:]) + 1 - got)
            assert i == got - 1
    assert {name for _, name in made[1:]} == {AHEAD}
    assert 0 <= min(ahead_by) and max(ahead_by) <= DEPTH


def test_an_error_in_the_thread_is_raised_to_the_caller_after_the_items_before_it():
    got = []
    with pytest.raises(ValueError, match="item 7"):
        with in_order(_prepared(20, [], fail_at=7)) as items:
            got.extend(items)
    assert got == ["head", *range(7)]


def test_an_error_in_prepare_is_raised_at_the_first_item():
    def prepare():
        raise KeyError("prepare")

    with pytest.raises(KeyError, match="prepare"):
        with in_order(prepare) as items:
            next(items)
    assert not [t for t in threading.enumerate() if t.name == AHEAD]


def test_leaving_the_block_early_stops_the_thread_before_its_next_item():
    made: list = []
    with pytest.raises(KeyError):
        with in_order(_prepared(10_000, made)) as items:
            for i in items:
                if i == 3:
                    raise KeyError("the caller's own error")
    # The block waited for the thread: nothing is made after it, and little was made ahead.
    after = len(made)
    assert not [t for t in threading.enumerate() if t.name == AHEAD]
    assert len(made) == after <= 1 + 4 + DEPTH + 1


def test_an_error_in_an_item_the_caller_made_comes_after_the_items_before_it():
    # The thread is slow; the caller makes some items itself, and the first of them fails:
    # every item before that one still comes, in order, then its error.
    failed_at: list[int] = []

    def make(k: int) -> int:
        if threading.current_thread().name == AHEAD:
            time.sleep(0.01)
        elif not failed_at:
            failed_at.append(k)
            raise ValueError(f"item {k}")
        return k

    got = []
    with pytest.raises(ValueError, match="item"):
        with in_order(lambda: ("head", 40, make)) as items:
            got.extend(items)
    assert failed_at and failed_at[0] > 0  # the caller's first item is never the first one
    assert got == ["head", *range(failed_at[0])]


def test_a_signal_while_waiting_is_raised_after_the_wait_ends():
    # Ctrl-C pressed again while the first one stops a thread: the wait goes on to the
    # thread's end (it reads an export closed next), then the signal is raised.
    done, began = threading.Event(), threading.Event()

    def work():
        began.wait()
        time.sleep(0.05)
        done.set()

    threading.Thread(target=work).start()
    calls = []

    def wait():
        calls.append(time.monotonic())
        if len(calls) == 1:
            began.set()
            raise KeyboardInterrupt  # (the signal, landing in the wait)
        done.wait()

    with pytest.raises(KeyboardInterrupt):
        waited(wait)
    assert done.is_set() and len(calls) == 2


def test_leaving_the_block_waits_for_the_thread_even_through_a_signal(monkeypatch):
    # The thread is making an item (0.1 s) when the caller leaves; a signal lands in the
    # wait for it: the block still ends after the thread does. (A thread's join that a
    # signal interrupts marks it stopped while it runs: the wait is on an event it sets.)
    from nsysprobe.common import ahead

    ended = threading.Event()
    interrupted = []
    wait = ahead.waited

    def signalled(what):
        def first_interrupted():
            if not interrupted:
                interrupted.append(1)
                raise KeyboardInterrupt
            return what()

        return wait(first_interrupted)

    monkeypatch.setattr(ahead, "waited", signalled)

    def make(k):
        time.sleep(0.1)
        if k == 1:
            ended.set()
        return k

    with pytest.raises(KeyboardInterrupt):
        with in_order(lambda: (None, 3, make), depth=1) as items:
            next(items)
            time.sleep(0.02)  # (the thread takes item 0)
    assert interrupted and not [t for t in threading.enumerate() if t.name == "nsysprobe-ahead"]
