"""What a CUDA API or OS-runtime call is: the categories of calls that the step account
(``account/``) turns into idle causes, the step patterns count, and the HTML timeline colours
a thread's row by.

    cuda_sync    cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize, ...
    cuda_copy    cudaMemcpy* / cuMemcpy* (a pageable copy blocks the thread)
    cuda_launch  kernel and graph launches (a launch over ``SLOW_LAUNCH_NS`` is module
                 loading or JIT: cuda_other)
    cuda_other   any other CUDA API call (cudaMalloc, cudaFree, ...)
    os_wait      blocking OS calls: poll, select, pthread_cond_wait, futex, read, ...
                 (waiting for DataLoader workers or I/O)
    os_call      other OS calls (munmap, mmap, open, ...)
    cpu          none of these: the thread ran its own code
"""

from __future__ import annotations

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
STATES = ("cuda_sync", "cuda_copy", "cuda_launch", "cuda_other", "os_wait", "os_call", "cpu")


def api_category(name: str) -> str:
    """The category a CUDA API call puts its thread in (``STATES``)."""
    if name in SYNC_APIS:
        return "cuda_sync"
    if name in LAUNCH_APIS:
        return "cuda_launch"
    if name.startswith(("cudaMemcpy", "cuMemcpy")):
        return "cuda_copy"
    return "cuda_other"


# OS calls that start a process (a DataLoader worker, a subprocess).
BIRTH_CALLS = frozenset(
    {"fork", "vfork", "_Fork", "__fork", "clone", "clone3", "posix_spawn", "posix_spawnp"}
)


def osrt_category(name: str) -> str:
    """The category an OS-runtime call puts its thread in (``STATES``)."""
    return "os_wait" if name in OS_WAITS else "os_call"
