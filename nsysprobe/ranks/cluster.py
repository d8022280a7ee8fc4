"""The Dask client the reports are analyzed on: the one given, one connected to a
``--scheduler`` (or Dask's configured address), else a local cluster made for the job.

A local cluster has at most one worker per CPU this process may use. A ``--scheduler`` must
accept the connection within 10 s, and finish Dask's handshake within 10 s more.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager

from nsysprobe.errors import InputError
from nsysprobe.ranks.bounded import number

SCHEDULER_CONNECT_S = 10.0  # at most, to connect to a --scheduler; as long again to shake hands
# Dask's connect timeout and the longest nsysprobe accepts: far past any wait for a connection,
# far below where Dask's deadlines overflow the clock (~1e10 s).
CONNECT_TIMEOUT = "distributed.comm.timeouts.connect"
MAX_CONNECT_TIMEOUT_S = 86_400.0


@contextmanager
def dask_client(client=None, *, scheduler: str | None = None, workers: int | None = None):
    """The given client, one connected to ``scheduler`` (or Dask's configured address), or a
    LocalCluster of ``workers`` processes (at most, and by default, one per CPU this process
    may use), closed on exit when made here."""
    if client is not None:
        yield client
        return
    import dask
    from distributed import Client, LocalCluster

    connect_s = _dask_connect_timeout_s()  # Dask's own, for every connection it makes
    address = scheduler or dask.config.get("scheduler-address", None)
    if address:
        timeout_s = min(SCHEDULER_CONNECT_S, connect_s)
        check_scheduler(str(address), timeout_s)
        try:
            made = Client(address, timeout=timeout_s)
        except (OSError, TimeoutError) as exc:
            raise InputError(
                f"--scheduler {address}: cannot connect ({exc}); start one with `dask "
                f"scheduler` and `dask worker {address}`, or leave --scheduler out for a "
                f"local cluster"
            ) from exc
        with made:
            yield made
        return
    import logging

    from distributed.core import Status
    from distributed.deploy.spec import SpecCluster

    n = max(1, min(workers or usable_cpus(), usable_cpus()))
    known = set(SpecCluster._instances)
    try:
        with _QuietStderr() as quiet:
            # The worker processes inherit standard error, and a Ctrl-C at the terminal
            # reaches them too: their tracebacks would follow this process's one line.
            quiet.silence()
            try:
                cluster = LocalCluster(
                    n_workers=n,
                    threads_per_worker=1,
                    processes=True,
                    memory_limit="auto",  # the machine's memory / n_workers
                    dashboard_address=None,
                    silence_logs=logging.ERROR,
                )
            except RuntimeError as exc:
                if "Timed out trying to connect" not in str(exc):
                    raise
                raise InputError(
                    f"{_connect_timeout_setting()}: a local Dask cluster did not start, its "
                    f"processes did not connect to each other within {connect_s:g} s; "
                    f"raise it (Dask's default is 30s) or unset it"
                ) from None
        with _QuietStderr() as quiet, cluster, Client(cluster) as made:
            try:
                yield made
            except BaseException:
                quiet.silence()  # the teardown of a stopped job: its line comes after
                raise
    except BaseException:
        # A cluster stopped (Ctrl-C) while its workers started cannot be closed: Dask asserts
        # on a worker still starting, at exit too, in a traceback after our one line. Its
        # worker processes are daemons and end with this one; Dask's exit hook leaves it.
        for cluster in set(SpecCluster._instances) - known:
            if cluster.status != Status.closed:
                cluster.shutdown_on_close = False
        raise


class _QuietStderr:
    """Standard error as it was on entering, given back on leaving; ``silence()`` points it
    at /dev/null until then (a local cluster's start and a stopped job's teardown, whose
    complaints would bury nsysprobe's one line: what a rank says comes back as its summary,
    not on standard error)."""

    def __enter__(self) -> _QuietStderr:
        sys.stderr.flush()
        self._saved = os.dup(2)
        return self

    def silence(self) -> None:
        sys.stderr.flush()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)

    def __exit__(self, *exc) -> None:
        os.dup2(self._saved, 2)
        os.close(self._saved)


def check_scheduler(address: str, timeout_s: float = SCHEDULER_CONNECT_S) -> None:
    """Raise InputError unless ``address`` is a scheduler address, a connection opens within
    ``timeout_s`` and what answers completes Dask's handshake within as long again. Dask's own
    client waits for the handshake without a limit: a server that answers anything else (a
    2 GiB frame header) holds it forever."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from distributed.comm import connect
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.registry import get_backend

    fix = (
        "give the address `dask scheduler` prints (tcp://HOST:PORT), or leave --scheduler out "
        "for a local cluster"
    )
    try:
        scheme, location = parse_address(address)
        if scheme == "inproc":
            raise ValueError("inproc:// reaches only a scheduler inside the same Python process")
        get_backend(scheme)
        if not 0 < parse_host_port(location)[1] < 1 << 16:
            raise ValueError("the port is not in 1-65535")
    except ValueError as exc:
        raise InputError(f"--scheduler {address}: not a scheduler address ({exc}); {fix}") from None

    async def handshake() -> None:
        # Dask gives up connecting after timeout_s; the handshake then gets as long again.
        comm = await asyncio.wait_for(connect(address, timeout=timeout_s), 2 * timeout_s)
        comm.abort()

    with ThreadPoolExecutor(1) as pool:  # a thread of its own: the caller may run a loop
        try:
            pool.submit(asyncio.run, handshake()).result()
        except asyncio.TimeoutError:
            raise InputError(
                f"--scheduler {address}: no Dask scheduler answered (something accepted the "
                f"connection but did not finish Dask's handshake within {number(2 * timeout_s)} "
                f"s); {fix}"
            ) from None
        except OSError as exc:
            raise InputError(
                f"--scheduler {address}: cannot connect ({exc}); start one with `dask "
                f"scheduler` and `dask worker {address}`, or leave --scheduler out for a "
                f"local cluster"
            ) from None
        except Exception as exc:  # noqa: BLE001 -- whatever answered is not a scheduler
            raise InputError(
                f"--scheduler {address}: what answered is not a Dask scheduler "
                f"({type(exc).__name__}: {exc}); {fix}"
            ) from None


def _dask_connect_timeout_s() -> float:
    """Dask's connect timeout (``CONNECT_TIMEOUT``) in seconds. It bounds every connection
    Dask makes, a local cluster's too, and Dask fails deep inside on a value it cannot use:
    InputError, naming the variable or setting, unless it is a duration over 0 s and at most
    ``MAX_CONNECT_TIMEOUT_S``. Call with ``distributed`` imported (it sets the default)."""
    import dask
    from dask.utils import parse_timedelta

    value = dask.config.get(CONNECT_TIMEOUT, None)
    try:
        seconds = None if isinstance(value, bool) else parse_timedelta(value, "s")
    except Exception:  # noqa: BLE001 -- Dask's parser raises ValueError, KeyError, IndexError...
        seconds = None
    if not isinstance(seconds, (int, float)) or not 0 < seconds <= MAX_CONNECT_TIMEOUT_S:
        raise InputError(
            f"{_connect_timeout_setting()}: not a connect timeout Dask can use (a duration over "
            f"0 s and at most {MAX_CONNECT_TIMEOUT_S / 3600:g} h, such as 30s); set one, or "
            f"unset it for Dask's default (30s)"
        )
    return float(seconds)


def _connect_timeout_setting() -> str:
    """Where Dask's connect timeout was set: the environment variable, else the setting."""
    import shlex

    import dask

    for variable, value in os.environ.items():
        # Dask's reading of DASK_* variables (dask.config.collect_env), '_' and '-' alike.
        key = variable[len("DASK_") :].lower().replace("__", ".").replace("_", "-")
        if variable.startswith("DASK_") and key == CONNECT_TIMEOUT:
            return f"{variable}={shlex.quote(value)}"
    value = dask.config.get(CONNECT_TIMEOUT, None)
    return f"Dask's setting {CONNECT_TIMEOUT} ({value!r}, in ~/.config/dask or $DASK_CONFIG)"


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
