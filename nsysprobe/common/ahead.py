"""A generator's items made on a second core while the caller works on the ones before.

numpy lets go of Python's lock inside its loops over large arrays (sorts, searches, ufuncs,
takes), so two threads each working on arrays of many thousand rows run on two cores: the
step account's idle pieces are made in a thread of their own while the account sums the busy
time and then the pieces made before (``account.process``).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")

# Items made ahead of the caller at most: what the thread holds beyond the caller's item.
DEPTH = 2
_DONE = object()


@contextmanager
def ahead(make: Callable[[], Iterator[T]], depth: int = DEPTH) -> Iterator[Iterator[T]]:
    """``with ahead(make) as items``: the items of ``make()`` in order, made in a thread of
    their own: ``depth`` made ahead of the caller's at most, and one under way. An error in
    the thread is raised to the caller at the item where it happened; leaving the block early
    (an error of the caller's, Ctrl-C) stops the thread before its next item, and the block
    waits for it."""
    made: queue.Queue = queue.Queue(depth)
    stop = threading.Event()

    def put(entry) -> bool:
        while not stop.is_set():
            try:
                made.put(entry, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for item in make():
                if not put((item, None)):
                    return
            put((_DONE, None))
        except BaseException as exc:  # noqa: BLE001 -- raised again in the caller's thread
            put((_DONE, exc))

    def items() -> Iterator[T]:
        while True:
            item, exc = made.get()
            if item is _DONE:
                if exc is not None:
                    raise exc
                return
            yield item

    thread = threading.Thread(target=work, name="nsysprobe-ahead", daemon=True)
    thread.start()
    try:
        yield items()
    finally:
        stop.set()
        thread.join()
