"""Python frames behind idle time: per idle bucket, the Python function and line that held
the training thread while the GPU idled.

nsys samples the Python stacks when asked (``nsysprobe run --python``, ``nsys profile
--python-sampling=true``; ``trace/payloads.py`` says how exports hold them).

Only the samples of the account's thread (the thread driving the GPU) are read. Each stands
for the sampler's period around it, the period being the median interval between the thread's
samples (1 ms at ``nsysprobe run --python``'s 1 kHz): [t - period/2, t + period/2). A sample
belongs to the idle bucket whose pieces in the steady steps (``Account.idle_spans``) cover most
of that window, if they cover more of it than the busy rest does; else it stands for busy
time and is left out. Not the bucket at its moment t: the sampler itself makes the sampled
thread wait microseconds for the GIL at that moment (``_in_idle``). A bucket's sampled time is
its samples times the period: an estimate of the time measured in the bucket, shown beside it.

Each sample is put down to the place a user would change: the innermost frame of the user's
own code (a file outside the library folders ``site-packages``, ``dist-packages`` and
``lib/pythonX.Y``; ``trace/payloads.py``), and with it, where the stack goes on into a
library, the library function that frame called (``torch.serialization.save``, not the
``_save`` it calls in turn): ``torch.serialization.save ← step at checkpoint.py:60``. A C
function (``gc.collect()``, a CUDA synchronization) has no Python frame of its own: the line
that called it is named (``step at gc_collect.py:72``, the line of ``gc.collect()``). A stack
of library frames only names its innermost one. The places of each bucket are listed by
samples, largest first (``PLACES_LISTED``); each recommendation's evidence names the places of
its buckets, and its reason the largest of them.

Without samples the analysis is skipped, saying why: no sampling in the capture, or samples
whose frames the export left out (a plain ``nsys export``; ``--include-json=true`` keeps them,
and nsysprobe passes it where nsys has it), or none on the account's thread in its idle time.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from nsysprobe.analyses.account import IDLE_CAUSES, Account
from nsysprobe.analyses.events import Events
from nsysprobe.common.table import distinct
from nsysprobe.trace.payloads import SAMPLING_DOMAINS, module_of, short_file
from nsysprobe.trace.sampling import Frame, PythonSamples

# Places listed per bucket.
PLACES_LISTED = 3
# Without two samples of the thread there is no period to measure.
MIN_SAMPLES = 2
NAME = "python_frames"


@dataclass(frozen=True)
class Site:
    """A frame as a report names it."""

    function: str
    file: str  # the file's base name
    line: int
    module: str = ""  # a library's module (``torch.serialization``); "" for the user's code

    @property
    def text(self) -> str:
        if self.module:
            return f"{self.module}.{self.function}"
        return f"{self.function} at {self.file}:{self.line}"


@dataclass(frozen=True)
class Place:
    """Where the thread was in a bucket's samples: the user's frame and the library
    function it called (either may be missing), with the samples and their time."""

    place: str  # as reports print it
    user: Site | None
    library: Site | None
    samples: int
    ns: int  # samples x the period


@dataclass(frozen=True)
class BucketFrames:
    bucket: str  # an idle cause of ``account.IDLE_CAUSES``
    bucket_ns: int  # the bucket's time in the account's steady steps, measured
    samples: int  # the thread's samples in the bucket's idle pieces
    sampled_ns: int  # samples x the period
    places: tuple[Place, ...]  # the largest first, at most ``PLACES_LISTED``


@dataclass(frozen=True)
class PythonFrames:
    thread: str  # the account's thread
    period_ns: int  # the sampler's period on that thread (median interval)
    form: str  # how the export holds the frames: "json" or "blobs"
    samples: int  # the thread's samples in the steady steps' idle time
    buckets: tuple[BucketFrames, ...]  # buckets with samples, most time measured first

    def evidence(self, buckets: str) -> tuple[str, str] | None:
        """For a recommendation whose evidence names ``buckets`` (comma-separated): the
        places behind them as evidence text, and the largest place as the reason's words;
        None when no bucket of them has samples."""
        names = {b.strip() for b in buckets.split(",")}
        found = [b for b in self.buckets if b.bucket in names and b.places]
        if not found:
            return None
        text = "; ".join(
            f"{b.bucket}: "
            + ", ".join(f"{p.place} {_ms(p.ns)} ({p.samples:,} samples)" for p in b.places)
            for b in found
        )
        top = max((p for b in found for p in b.places), key=lambda p: (p.samples, p.place))
        return text, (
            f"in Python, {top.place} held the thread {_ms(top.ns)} of it ({top.samples:,} samples)"
        )


@dataclass(frozen=True)
class NoFrames:
    """Why there are no frames to show, and how to get them."""

    reason: str
    fix: str


CAPTURE_FIX = (
    "profile with `nsysprobe run --python` (nsys profile --python-sampling=true), and export "
    "with `nsys export --type sqlite --include-json=true`"
)


def sampled(events: Events) -> bool:
    """Whether the capture sampled Python (a sampling domain exists): only then does the
    account keep its idle pieces (``analyze_account(idle_spans=True)``)."""
    return any(name in SAMPLING_DOMAINS for name in events.lookups.nvtx_domains.values())


def analyze_python_frames(events: Events, account: Account | None) -> PythonFrames | NoFrames:
    """The places behind each idle bucket of ``account`` (see the module docstring)."""
    if not sampled(events):
        return NoFrames("no Python sampling in the trace", CAPTURE_FIX)
    if account is None or account.idle_spans is None or account.thread_id < 0:
        return NoFrames(
            "no step account to attribute the Python samples to (no GPU work, or no CUDA "
            "calls to tell the thread driving it)",
            "profile with --trace=cuda,nvtx,osrt",
        )
    samples = events.python_samples(account.thread_id)
    if len(samples) < MIN_SAMPLES:
        return NoFrames(
            f"no Python samples of {account.thread}, the thread driving the GPU",
            "sample every thread that runs Python (nsys --python-sampling samples each)",
        )
    if not samples.readable:
        version = events.lookups.nsys_version or "unknown"
        return NoFrames(
            f"{len(samples):,} Python samples of {account.thread}, but the export holds none "
            f"of their frames (nsys {version}; nsys exports them only when asked)",
            "export the report again with `nsys export --type sqlite --include-json=true "
            "REPORT` (nsys 2025.3 has the option; nsys 2023.4 cannot export them to SQLite: "
            "use a newer nsys)",
        )
    readable = samples.stack >= 0
    times = samples.start_ns[readable]
    if times.size < MIN_SAMPLES:
        return NoFrames(f"fewer than {MIN_SAMPLES} readable Python samples", CAPTURE_FIX)
    period = int(np.median(np.diff(times)))
    cause, stack = _in_idle(times, samples.stack[readable], account, period)
    if not cause.size:
        return NoFrames(f"no Python sample of {account.thread} fell in its idle time", CAPTURE_FIX)
    of_stack, places = _places(samples)
    buckets = []
    for c in distinct(cause).tolist():
        name = IDLE_CAUSES[c]
        here = of_stack[stack[cause == c]]
        keys, counts = np.unique(here, return_counts=True)
        order = sorted(range(keys.size), key=lambda i: (-counts[i], places[keys[i]].place))
        listed = tuple(
            replace(places[keys[i]], samples=int(counts[i]), ns=int(counts[i]) * period)
            for i in order[:PLACES_LISTED]
        )
        total = int(here.size)
        buckets.append(BucketFrames(name, account.ns(name), total, total * period, listed))
    buckets.sort(key=lambda b: (-b.bucket_ns, -b.samples, b.bucket))
    return PythonFrames(
        thread=account.thread,
        period_ns=period,
        form=samples.form,
        samples=int(cause.size),
        buckets=tuple(buckets),
    )


def _in_idle(times: np.ndarray, stacks: np.ndarray, account: Account, period: int):
    """The cause (index into ``IDLE_CAUSES``) and stack of each sample that stands for idle
    time: its period around it, [t - period/2, t + period/2), spent more in the idle pieces of
    one cause than in any other cause's or in busy time.

    Nsys's sampler perturbs what it samples: each sample hands the GIL to the sampling thread,
    and the sampled thread waits to take it back in ``pthread_cond_wait``, microseconds that
    the OS-runtime trace records and the account counts as ``os_wait`` (``host_postprocess``:
    1,114 such waits for 1,578 samples, 593 sample times inside them, 26 ms in all). The
    sample's moment falls in that wait; its period shows where the time went."""
    spans = account.idle_spans
    order = np.argsort(spans.start_ns, kind="stable")
    pieces = spans.start_ns[order], spans.end_ns[order], spans.cause[order]
    cause = np.full(times.size, -1, dtype=np.int64)
    for lo in range(0, times.size, SAMPLES_PER_RUN):
        run = slice(lo, lo + SAMPLES_PER_RUN)
        cause[run] = _causes(times[run], period, *pieces)
    idle = cause >= 0
    return cause[idle], stacks[idle]


def _causes(times: np.ndarray, period: int, s, e, c) -> np.ndarray:
    """``_in_idle`` for a run of samples: each one's cause, -1 for none."""
    lo = times - period // 2
    hi = lo + period
    # The pieces each window overlaps: from the first ending after its start to the last
    # starting before its end (pieces are disjoint and sorted), a bounded run at a time.
    first = np.searchsorted(e, lo, side="right")
    count = np.maximum(np.searchsorted(s, hi, side="left") - first, 0)
    n_causes = len(IDLE_CAUSES)
    cause = np.full(times.size, -1, dtype=np.int64)
    ends = np.cumsum(count)
    at = 0
    while at < times.size:
        stop = int(np.searchsorted(ends, ends[at] - count[at] + PAIRS_PER_RUN, side="right"))
        stop = max(stop, at + 1)
        run = slice(at, stop)
        n = count[run]
        sample = np.repeat(np.arange(stop - at), n)
        piece = np.repeat(first[run] - np.cumsum(n) + n, n) + np.arange(int(n.sum()))
        got = np.minimum(e[piece], hi[run][sample]) - np.maximum(s[piece], lo[run][sample])
        per = np.bincount(
            sample * n_causes + c[piece], weights=got, minlength=(stop - at) * n_causes
        ).reshape(stop - at, n_causes)
        best = per.argmax(axis=1)
        most = per[np.arange(stop - at), best]
        busy = period - per.sum(axis=1)  # busy, or outside the steady steps
        cause[run] = np.where(most > busy, best, -1)
        at = stop
    return cause


# Samples weighed at once, and at most this many pairs of (sample, idle piece) among them: a
# window of a kernel-heavy capture overlaps many short launch gaps; these bound what is held.
SAMPLES_PER_RUN = 1 << 15
PAIRS_PER_RUN = 1 << 18


def _places(samples: PythonSamples) -> tuple[np.ndarray, list[Place]]:
    """Each stack's place, as an index into the distinct places (their samples not yet
    counted): equal places, equal indexes."""
    out = np.empty(len(samples.stacks), dtype=np.int64)
    index: dict[str, int] = {}
    places: list[Place] = []
    for i, stack in enumerate(samples.stacks):
        user, library = place_of(stack)
        text = _text(user, library)
        if text not in index:
            index[text] = len(places)
            places.append(Place(text, user, library, 0, 0))
        out[i] = index[text]
    return out, places


def place_of(stack: tuple[Frame, ...]) -> tuple[Site | None, Site | None]:
    """The innermost frame of the user's code, and the library function it called; a stack
    of library frames only: its innermost one, as the library's."""
    for k, frame in enumerate(stack):
        if _module(frame.file) is None:
            called = stack[k - 1] if k else None
            return _site(frame), None if called is None else _site(called)
    return None, (_site(stack[0]) if stack else None)


def _module(file: str) -> str | None:
    """A library's module; Python's own code (``<frozen importlib._bootstrap>``) counts as
    a library named by what the brackets hold. None for the user's files."""
    if file.startswith("<") and file.endswith(">") and "/" not in file:
        inner = file[1:-1].removeprefix("frozen ").strip()
        return inner or "python"
    return module_of(file)


def _site(frame: Frame) -> Site:
    return Site(frame.function, short_file(frame.file), frame.line, _module(frame.file) or "")


def _text(user: Site | None, library: Site | None) -> str:
    if user is None:
        return f"{library.text} ({library.file}:{library.line})" if library else "unknown"
    if library is None:
        return user.text
    return f"{library.text} ← {user.text}"


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.1f} ms"
