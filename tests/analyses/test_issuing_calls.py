"""The join of GPU work to the CUDA API call that issued it (``Events.issuing_calls``), held
to a row-by-row join in Python over the same export: correlation ids are per process, the
first call of an id that occurs twice issues it, and an id no call has is NaN."""

from __future__ import annotations

import numpy as np
import pytest
from independent import query
from reliability.hostile import crafted

from nsysprobe.analyses.events import Events
from nsysprobe.trace.reader import Trace

from conftest import SAMPLE_TRACES, shared_trace

RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"


def calls_by_hand(path) -> dict[tuple[int, int], tuple[int, int]]:
    """(pid, correlation id) -> (globalTid, nameId) of its first call in the table."""
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for tid, corr, name in query(
        path, f"SELECT globalTid, correlationId, nameId FROM {RUNTIME} ORDER BY rowid"
    ):
        if corr is not None:  # a NULL id joins nothing
            out.setdefault(((tid >> 24) & 0xFFFFFF, corr), (tid, name))
    return out


def wanted_ops(path) -> tuple[np.ndarray, np.ndarray]:
    """Every kernel's and copy's (pid, correlation id), and some that match no call."""
    rows = query(
        path,
        "SELECT (globalPid >> 24) & 16777215, ifnull(correlationId, -1) "
        "FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL SELECT (globalPid >> 24) & 16777215, "
        "ifnull(correlationId, -1) FROM CUPTI_ACTIVITY_KIND_MEMCPY",
    )
    pids, corrs = (np.array(c, dtype=np.int64) for c in zip(*rows))
    # another process's id, an id past every call, -1 and one past 32 bits
    extra_p = np.array([pids[0] + 1, pids[0], pids[0], pids[0]])
    extra_c = np.array([corrs[0], 10**9, -1, (1 << 32) + int(corrs[0])])
    return np.concatenate([pids, extra_p]), np.concatenate([corrs, extra_c])


def check(path) -> None:
    by_hand = calls_by_hand(path)
    pids, corrs = wanted_ops(path)
    with Trace(path) as t:
        events = Events.load(t)
    got = events.issuing_calls(pids, corrs)
    expect = [by_hand.get((int(p), int(c)), (np.nan, np.nan)) for p, c in zip(pids, corrs)]
    tid, name = (np.array(c, dtype=float) for c in zip(*expect))
    assert np.isnan(tid).sum() >= 4  # the four made up match nothing
    assert np.array_equal(np.asarray(got["tid"], dtype=float), tid, equal_nan=True)
    assert np.array_equal(np.asarray(got["nameId"], dtype=float), name, equal_nan=True)
    # One process's ids at a time (``issuing_rows_of``), in 64 bits and, where they fit, 32.
    rt = events.runtime
    for pid in np.unique(pids).tolist():
        mine = pids == pid
        for ids in (corrs[mine], corrs[mine][np.abs(corrs[mine]) < 1 << 31].astype(np.int32)):
            row = events.issuing_rows_of(pid, ids)
            assert row.dtype == np.int64
            joined = [
                (int(rt["globalTid"][r]), int(rt["nameId"][r])) if r >= 0 else None
                for r in row.tolist()
            ]
            assert joined == [by_hand.get((pid, c)) for c in ids.tolist()]


@pytest.mark.parametrize(
    "path",
    [
        SAMPLE_TRACES / "h200_pinned.sqlite",
        "nsysai_mfu_2gpu_before_nsys2026.2.sqlite",  # two processes, ids repeated across them
    ],
)
def test_work_joins_the_call_of_its_process_and_id(path):
    check(path if not isinstance(path, str) else shared_trace(path))


def test_an_id_called_twice_joins_its_first_call(tmp_path):
    # Every tenth call again, later in the table, by another thread of the process.
    check(
        crafted(
            tmp_path,
            f"INSERT INTO {RUNTIME} (start, end, eventClass, globalTid, correlationId, nameId, "
            f"returnValue, callchainId) SELECT start + 1, end + 1, eventClass, globalTid + 1, "
            f"correlationId, nameId + 1, returnValue, callchainId FROM {RUNTIME} "
            f"WHERE rowid % 10 = 0",
        )
    )


def test_ids_wider_than_32_bits_join_the_same(tmp_path):
    tables = (RUNTIME, "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY")
    check(
        crafted(
            tmp_path, *(f"UPDATE {t} SET correlationId = correlationId + (1 << 40)" for t in tables)
        )
    )


def test_two_processes_whose_ids_rise_together(tmp_path):
    # Every other call (and the work it issued) moved to a second process: the ids still
    # rise down the table, but an id means a call of each process.
    moved = f"(SELECT correlationId FROM {RUNTIME} WHERE rowid % 2 = 0)"
    check(
        crafted(
            tmp_path,
            f"UPDATE {RUNTIME} SET globalTid = globalTid + (1 << 24) WHERE rowid % 2 = 0",
            *(
                f"UPDATE {t} SET globalPid = globalPid + (1 << 24) WHERE correlationId IN {moved}"
                for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY")
            ),
        )
    )


def test_a_null_id_joins_no_call_whose_id_is_null(tmp_path):
    # A kernel with no id (read as -1, NO_ID) and a call of its process with none: no join.
    check(
        crafted(
            tmp_path,
            f"UPDATE {RUNTIME} SET correlationId = NULL WHERE rowid = 5",
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET correlationId = NULL WHERE rowid = 7",
        )
    )
