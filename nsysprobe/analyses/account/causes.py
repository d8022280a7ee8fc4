"""The account's words: its busy kinds and idle causes, and the categories of API calls and
the states of a thread that lead to a cause."""

from __future__ import annotations

import numpy as np

from nsysprobe.analyses.calls import (
    API_ALLOC,
    API_COPY,
    API_LAUNCH,
    API_MODULE,
    API_OTHER,
    API_SYNC,
)

NO_RANGE = "(no NVTX range)"

COMPUTE, COMMUNICATION, MEMSET = "compute", "communication", "memset"
IDLE_CAUSES = (
    "profiler_overhead",
    "queued",
    "sync",
    "readback",
    "blocking_copy",
    "allocator",
    "launch",
    "loading",
    "loader_wait",
    "os_call",
    "os_wait",
    "module_loading",
    "cuda_api",
    "cpu",
    "other_process",
)
# API categories (``calls.API_KINDS``), in the order a thread's nested calls resolve.
SYNC, COPY, _ALLOC, LAUNCH, OTHER, _MODULE = (
    API_SYNC,
    API_COPY,
    API_ALLOC,
    API_LAUNCH,
    API_OTHER,
    API_MODULE,
)
DRAINING = (SYNC, COPY, _ALLOC)
# What a thread was doing at a moment of idle (``thread_states``).
OWN, OS_WAIT, OS_CALL, API = 0, 1, 2, 10
_CATEGORY_CAUSE = {
    SYNC: "sync",
    COPY: "blocking_copy",
    _ALLOC: "allocator",
    LAUNCH: "launch",
    OTHER: "cuda_api",
    _MODULE: "module_loading",
}
CAUSE = {name: i for i, name in enumerate(IDLE_CAUSES)}  # cause -> its index
# API category -> the index of its idle cause.
CAT_CAUSE = np.array([CAUSE[_CATEGORY_CAUSE[k]] for k in range(len(_CATEGORY_CAUSE))])
