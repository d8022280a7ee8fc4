"""What a CUDA API or OS-runtime call is: the one set of categories that the step account
(``account/``) turns into idle causes and the HTML timeline colours a thread's row by.

    cuda_sync    cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize, ...
    cuda_copy    cudaMemcpy* / cuMemcpy* and memsets (a pageable copy blocks the thread)
    cuda_alloc   cudaMalloc, cudaFree and the other allocator calls (``ALLOCATOR_PREFIXES``)
    cuda_launch  kernel and graph launches
    cuda_other   any other CUDA API call (event records, stream waits, ...)
    cuda_module  loading, linking or compiling GPU code (``MODULE_PREFIXES``), and launches
                 over ``SLOW_LAUNCH_NS`` (lazy loading or JIT)
    os_wait      blocking OS calls: poll, select, pthread_cond_wait, futex, read, ...
                 (waiting for DataLoader workers or I/O)
    os_call      other OS calls (munmap, mmap, open, ...)
    cpu          none of these: the thread ran its own code
"""

from __future__ import annotations

import numpy as np

# A launch that takes this long is lazy module loading or JIT, not launch overhead.
SLOW_LAUNCH_NS = 1_000_000

SYNC_APIS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cuEventSynchronize",
    }
)
LAUNCH_APIS = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchCooperativeKernel",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cudaGraphLaunch",
        "cuGraphLaunch",
    }
)
OS_WAITS = frozenset(
    {
        "poll",
        "ppoll",
        "select",
        "pselect",
        "pselect6",
        "epoll_wait",
        "epoll_pwait",
        "pthread_cond_wait",
        "pthread_cond_timedwait",
        "pthread_cond_clockwait",
        "pthread_mutex_lock",
        "pthread_mutex_timedlock",
        "pthread_rwlock_rdlock",
        "pthread_rwlock_wrlock",
        "pthread_join",
        "futex",
        "sem_wait",
        "sem_timedwait",
        "sem_clockwait",
        "read",
        "readv",
        "pread",
        "pread64",
        "recv",
        "recvfrom",
        "recvmsg",
        "nanosleep",
        "clock_nanosleep",
        "usleep",
        "sleep",
        "wait",
        "waitpid",
        "waitid",
        "accept",
        "accept4",
        "connect",
    }
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
# Loading, linking or compiling GPU code (lazy module loading, JIT).
MODULE_PREFIXES = (
    "cuModuleLoad",
    "cuLibraryLoad",
    "cudaLibraryLoad",
    "cuLink",
    "nvrtc",
    "nvJitLink",
)
# The categories of CUDA API calls, by code (``api_kind``), in the order a thread's nested
# calls resolve (the outermost call wins).
API_KINDS = ("cuda_sync", "cuda_copy", "cuda_alloc", "cuda_launch", "cuda_other", "cuda_module")
API_SYNC, API_COPY, API_ALLOC, API_LAUNCH, API_OTHER, API_MODULE = range(len(API_KINDS))
STATES = (*API_KINDS, "os_wait", "os_call", "cpu")


def api_kind(name: str) -> int:
    """The code in ``API_KINDS`` of a CUDA API call by its name (``slow_launches``: by its
    length too)."""
    if name in SYNC_APIS:
        return API_SYNC
    if name in LAUNCH_APIS:
        return API_LAUNCH
    if name.startswith(MODULE_PREFIXES):
        return API_MODULE
    if name.startswith(ALLOCATOR_PREFIXES):
        return API_ALLOC
    # Async copies and memsets block too when the host side is pageable; they drain a GPU
    # only then.
    if name.startswith(("cudaMemcpy", "cuMemcpy", "cudaMemset", "cuMemset")):
        return API_COPY
    return API_OTHER


def slow_launches(kinds: np.ndarray, durations: np.ndarray) -> np.ndarray:
    """``kinds`` (codes of ``API_KINDS``) with the launches longer than ``SLOW_LAUNCH_NS``
    made ``cuda_module``: lazy module loading or JIT, not launch overhead."""
    slow = (kinds == API_LAUNCH) & (durations > SLOW_LAUNCH_NS)
    return np.where(slow, API_MODULE, kinds).astype(kinds.dtype)


# OS calls that start a process (a DataLoader worker, a subprocess).
BIRTH_CALLS = frozenset(
    {"fork", "vfork", "_Fork", "__fork", "clone", "clone3", "posix_spawn", "posix_spawnp"}
)


def osrt_category(name: str) -> str:
    """The category an OS-runtime call puts its thread in (``STATES``)."""
    return "os_wait" if name in OS_WAITS else "os_call"
