"""A generator's items made in a thread of their own, ahead of the caller
(``nsysprobe/common/ahead.py``)."""

from __future__ import annotations

import threading

import pytest

from nsysprobe.common.ahead import DEPTH, ahead


def _counted(n: int, made: list, fail_at: int | None = None):
    def make():
        for i in range(n):
            if i == fail_at:
                raise ValueError(f"item {i}")
            made.append(threading.current_thread().name)
            yield i

    return make


def test_the_items_come_in_order_made_in_another_thread_at_most_depth_ahead():
    made: list[str] = []
    ahead_by = []
    with ahead(_counted(50, made)) as items:
        got = []
        for i in items:
            got.append(i)
            ahead_by.append(len(made) - len(got))
    assert got == list(range(50))
    assert set(made) == {"nsysprobe-ahead"}
    # The item taken, the ones waiting in the queue, and the one the thread holds.
    assert 0 <= min(ahead_by) and max(ahead_by) <= DEPTH + 1


def test_an_error_in_the_thread_is_raised_to_the_caller_after_the_items_before_it():
    got = []
    with pytest.raises(ValueError, match="item 7"):
        with ahead(_counted(20, [], fail_at=7)) as items:
            got.extend(items)
    assert got == list(range(7))


def test_leaving_the_block_early_stops_the_thread_before_its_next_item():
    made: list[str] = []
    with pytest.raises(KeyError):
        with ahead(_counted(10_000, made)) as items:
            for i in items:
                if i == 3:
                    raise KeyError("the caller's own error")
    # The block waited for the thread: nothing is made after it, and little was made ahead.
    after = len(made)
    assert not [t for t in threading.enumerate() if t.name == "nsysprobe-ahead"]
    assert len(made) == after <= 4 + DEPTH + 1
