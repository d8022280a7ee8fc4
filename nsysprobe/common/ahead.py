"""Items made in order on two cores: a thread of their own makes them ahead of the caller, and
the caller makes the next one itself when the one it waits for is not made yet.

numpy lets go of Python's lock inside its loops over large arrays (sorts, searches, ufuncs,
takes), so two threads each working on arrays of many thousand rows run on two cores: the
step account's idle pieces are made a run of intervals at a time in a thread of their own
while the account sums the busy time, and by both threads once it has (``account.process``).

Threads that read the export are waited for to their end, through signals (``waited``,
``shut_down``): the export is closed after them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future
from concurrent.futures import wait as wait_for
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")
H = TypeVar("H")

# Items made ahead of the caller at most: what the thread holds beyond the caller's item.
DEPTH = 2
PREPARE = -1  # the index of prepare's error


@contextmanager
def in_order(
    prepare: Callable[[], tuple[H, int, Callable[[int], T]]], depth: int = DEPTH
) -> Iterator[Iterator]:
    """``with in_order(prepare) as items``: ``prepare()``, run in a thread of its own, gives
    (head, n, make); ``items`` yields head, then ``make(0)`` ... ``make(n - 1)`` in order.

    The thread makes the items one after the other, ``depth`` ahead of the caller's at most.
    The caller, when the item it asks for is not made yet, makes the next one no thread has
    taken (up to ``depth`` ahead of its own) instead of waiting: each index is made once, by
    the thread that takes it, and each thread takes its indexes in increasing order. An error
    in either thread is raised to the caller at the item where it happened; leaving the block
    early (an error of the caller's, Ctrl-C) stops the thread before its next item, and the
    block waits for it."""
    cond = threading.Condition()
    made: dict[int, T] = {}
    # What both threads share, under ``cond``: the next index to take, the items taken by
    # the caller so far, what ``prepare`` gave, and the error of each index that failed
    # (``PREPARE``: prepare's).
    at = {"next": 0, "taken": 0}
    given: list = []
    failed: dict[int, BaseException] = {}
    stop = threading.Event()

    def keep(k: int, item: T) -> None:
        with cond:
            made[k] = item
            cond.notify_all()

    def fail(k: int, exc: BaseException) -> None:
        with cond:
            failed[k] = exc
            cond.notify_all()

    def work() -> None:
        k = PREPARE
        try:
            head, n, make = prepare()
            with cond:
                given.extend((head, n, make))
                cond.notify_all()
            while True:
                with cond:
                    while (
                        not stop.is_set() and at["next"] < n and at["next"] - at["taken"] >= depth
                    ):
                        cond.wait()
                    if stop.is_set() or at["next"] >= n:
                        return
                    k = at["next"]
                    at["next"] += 1
                keep(k, make(k))
        except BaseException as exc:  # noqa: BLE001 -- raised again in the caller's thread
            fail(k, exc)
        finally:
            done.set()

    def items() -> Iterator:
        with cond:
            while not given and PREPARE not in failed:
                cond.wait()
            if not given:
                raise failed[PREPARE]
            head, n, make = given
        yield head
        for k in range(n):
            while True:
                with cond:
                    if k in made:
                        item = made.pop(k)
                        at["taken"] = k + 1
                        cond.notify_all()
                        break
                    if k in failed:
                        raise failed[k]
                    if at["next"] >= n or at["next"] - k > depth:
                        cond.wait()
                        continue
                    j = at["next"]
                    at["next"] += 1
                try:
                    item = make(j)
                except Exception as exc:  # noqa: BLE001 -- raised at item j, after those before
                    fail(j, exc)
                    continue
                keep(j, item)
            yield item

    done = threading.Event()
    thread = threading.Thread(target=work, name="nsysprobe-ahead", daemon=True)
    thread.start()
    try:
        yield items()
    finally:
        stop.set()
        with cond:
            cond.notify_all()
        waited(done.wait)
        thread.join()  # (done: it returns)


def waited(wait: Callable[[], object]) -> None:
    """``wait()`` (for an event a thread sets as it ends, for futures) to its end, through
    signals: Ctrl-C pressed again while the first one stops the threads would leave them
    reading an export that is closed next ("Cannot close AdbcConnection with open
    AdbcStatement", an internal error). A signal raised while waiting is raised after the
    wait. Not a thread's ``join``: one a signal interrupts marks a thread that still runs as
    stopped (Python 3.11), so the next returns at once."""
    pending: KeyboardInterrupt | None = None
    while True:
        try:
            wait()
            break
        except KeyboardInterrupt as exc:  # (SIGTERM and SIGHUP too: cli._Stopped)
            pending = pending or exc
    if pending is not None:
        raise pending


def shut_down(pool: Executor, futures: Iterable[Future]) -> None:
    """Wait for ``futures`` through signals (``waited``), then shut ``pool`` down: leaving a
    block whose work the pool reads, whatever ends it."""
    try:
        waited(lambda: wait_for(futures))
    finally:
        pool.shutdown()
