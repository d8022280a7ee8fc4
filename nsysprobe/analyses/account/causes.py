"""The account's words: its busy kinds and idle causes, and the categories of API calls and
the states of a thread that lead to a cause."""

from __future__ import annotations

import numpy as np

from nsysprobe.analyses.calls import LAUNCH_APIS, SYNC_APIS

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
)
ALLOCATOR_PREFIXES = (
    "cudaMalloc",
    "cudaFree",
    "cudaHostAlloc",
    "cudaHostRegister",
    "cudaHostUnregister",
    "cuMemAlloc",
    "cuMemFree",
    "cuMemHostAlloc",
    "cuMemCreate",
    "cuMemRelease",
    "cuMemMap",
    "cuMemUnmap",
    "cuMemAddressReserve",
    "cuMemAddressFree",
    "cudaMemPool",
    "cuMemPool",
)
# API categories, in the order a thread's nested calls resolve (the outermost call wins).
_SYNC, _COPY, _ALLOC, _LAUNCH, _OTHER, _MODULE = range(6)
_DRAINING = (_SYNC, _COPY, _ALLOC)
# What a thread was doing at a moment of idle (``_thread_states``).
_OWN, _OS_WAIT, _OS_CALL, _API = 0, 1, 2, 10
_CATEGORY_CAUSE = {
    _SYNC: "sync",
    _COPY: "blocking_copy",
    _ALLOC: "allocator",
    _LAUNCH: "launch",
    _OTHER: "cuda_api",
    _MODULE: "module_loading",
}
_CAUSE = {name: i for i, name in enumerate(IDLE_CAUSES)}  # cause -> its index
# API category -> the index of its idle cause.
_CAT_CAUSE = np.array([_CAUSE[_CATEGORY_CAUSE[k]] for k in range(len(_CATEGORY_CAUSE))])


def _api_category(name: str) -> int:
    if name in SYNC_APIS:
        return _SYNC
    if name in LAUNCH_APIS:
        return _LAUNCH
    if name.startswith(("cuModuleLoad", "cuLibraryLoad", "cudaLibraryLoad")):
        return _MODULE
    if name.startswith(ALLOCATOR_PREFIXES):
        return _ALLOC
    if name.startswith(("cudaMemcpy", "cuMemcpy")) and "Async" not in name:
        return _COPY
    if name.startswith(("cudaMemcpy", "cuMemcpy", "cudaMemset", "cuMemset")):
        # Async copies block too when the host side is pageable; they drain a GPU only then.
        return _COPY
    return _OTHER
