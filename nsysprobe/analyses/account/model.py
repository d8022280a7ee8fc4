"""What an account holds: frozen dataclasses of buckets, steps, copies, read-backs, periodic
steps and idle spans, per process and GPU (the package docstring defines them)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from nsysprobe.analyses.communication import CollectiveSummary
from nsysprobe.common.frames import Tables

EQUAL_WINDOWS = "equal windows"  # how ``windows`` begins without steps


@dataclass(frozen=True)
class Detail:
    name: str  # an API call, OS call or NVTX range (numbers masked), or a copy's size
    ns: int


@dataclass(frozen=True)
class Bucket:
    name: str  # a busy kind or an idle cause (see the module docstring)
    kind: str  # "busy" or "idle"
    total_ns: int  # over all steps
    median_ns: int  # median over steps
    share_ratio: float  # total_ns / summed step wall time
    details: tuple[Detail, ...]


@dataclass(frozen=True)
class AccountStep:
    index: int
    name: str
    start_ns: int
    wall_ns: int
    busy_ns: int
    idle_ns: int
    buckets: tuple[tuple[str, int], ...]  # (bucket name, ns), only those above zero
    communication_ns: int = 0  # NCCL work in the step (union), hidden or not
    communication_overlapped_ns: int = 0  # the part under compute kernels
    startup: bool = False  # a start-up step: in no total of the account (``STARTUP_RATIO``)
    final: bool = False  # a one-time final step (a last checkpoint): in no total either


@dataclass(frozen=True)
class HtodCopies:
    """The steady steps' host-to-device copies by host memory: the pageable ones, and the
    pinned ones of a like size (``LIKE_SIZE``, ``LINK_BOUND_BYTES``), whose rate is what
    pinning would give those (a small copy's rate is its latency's, not the link's)."""

    steps_with_copy: int = 0  # steady steps in which a host-to-device copy starts
    pageable_count: int = 0
    pageable_bytes: int = 0
    pageable_ns: int = 0
    pinned_like_count: int = 0
    pinned_like_bytes: int = 0
    pinned_like_ns: int = 0


# Pinned copies within this factor of the pageable copies' median size time what pinning
# would give them; so do any two copies of at least ``LINK_BOUND_BYTES``, whose time is the
# link's rate, not the per-copy latency (8 MiB take ~160 us at 50 GB/s, ~10 us of it latency).
LIKE_SIZE = 2
LINK_BOUND_BYTES = 8 << 20


@dataclass(frozen=True)
class Readbacks:
    """Device-to-host copies that drained the GPU, as ``readback`` counts them."""

    count: int
    median_bytes: int
    total_bytes: int


@dataclass(frozen=True)
class PeriodicSteps:
    """An event every ``period`` steady steps that made those steps long (module docstring)."""

    period: int
    steps: tuple[str, ...]  # the periodic steps' names, in order
    indices: tuple[int, ...]  # their indices among the account's steps (``AccountStep.index``)
    occurrences: tuple[str, ...]  # each occurrence's first step (one may spill into the next)
    typical_wall_ns: int  # the median of the other steady steps
    median_wall_ns: int  # the median of the periodic steps
    excess_ns: int  # the periodic steps' time beyond the other steps' mean, summed
    excess_busy_ns: int
    excess_idle_ns: int
    excess_buckets: tuple[Detail, ...]  # per bucket the time beyond the others', largest first
    ranges: tuple[Detail, ...]  # NVTX ranges of the step thread run only in these steps
    details: tuple[Detail, ...]  # the idle details of these steps, largest first
    # The other steady steps' buckets, scaled to all the steady steps, and what overlap could
    # hide in them scaled the same way (``Account.hideable_ns``).
    normal_buckets: tuple[Bucket, ...] = ()
    normal_hideable_ns: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class IdleSpans:
    """Idle pieces of the steady steps in time order: [start, end) and the index of the
    cause in ``IDLE_CAUSES``."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    cause: np.ndarray

    def __len__(self) -> int:
        return int(self.start_ns.size)


@dataclass(frozen=True)
class IdleGaps:
    """The idle stretches of the steady steps longer than ``min_gap_ns`` (from one piece of
    the account's GPU work to the next, across step edges, while no other process's work held
    the device), in time order, with their time by cause: what the gap tables list
    (``gaps.py``), in the account's words. ``cause`` per gap: the index in ``IDLE_CAUSES`` of
    the cause holding most of it; ``name`` the detail naming most of that cause's time in it
    (None when none does); ``by_cause``: (cause, name, ns) over all the gaps, largest first.
    ``queued_start_ns``: the ``queued`` idle in the stretches of at most
    ``gap_sums.QUEUED_START_NS`` (the GPU starting work it already had)."""

    min_gap_ns: int
    start_ns: np.ndarray
    end_ns: np.ndarray
    cause: np.ndarray
    name: np.ndarray
    by_cause: tuple[tuple[str, str | None, int], ...]
    queued_start_ns: int = 0

    def __len__(self) -> int:
        return int(self.start_ns.size)


@dataclass(frozen=True)
class Account(Tables):
    TABLES = {"buckets": Bucket, "steps": (AccountStep, "buckets")}

    pid: int
    device_id: int
    thread: str  # the step thread, or the thread issuing most kernels without steps
    windows: str  # what a step is here: an NVTX pattern or the fixed windows
    step_count: int
    wall_ns: int  # summed over steps
    median_wall_ns: int
    busy_ns: int
    idle_ns: int
    idle_ratio: float  # idle_ns / wall_ns
    buckets: tuple[Bucket, ...]  # busy kinds, then idle causes, each largest first
    steps: tuple[AccountStep, ...]
    communication_ns: int  # all NCCL work in the steps (union), hidden or not
    communication_overlapped_ns: int  # the part under compute kernels
    readbacks: Readbacks
    loader_processes: int  # DataLoader worker processes in the report (pt_data_worker)
    collectives: tuple[CollectiveSummary, ...] = ()  # per collective, most exposed first
    # Every NCCL operation of the process on the device, in or out of the steps, for the
    # cross-rank arrivals (``arrivals.py``); not part of the JSON.
    communication_ops: CommunicationOps | None = None
    # The leading steps left out of every total above as start-up (``STARTUP_RATIO``), and
    # their wall time; the steps they are set against: the longest of the others.
    startup_steps: int = 0
    startup_ns: int = 0
    # Trailing steps as many times longer than every steady step (a final checkpoint or
    # evaluation): one-time too, left out of every total the same way.
    final_steps: int = 0
    final_ns: int = 0
    steady_longest_ns: int = 0
    # GPU work before the first window that is start-up: without steps, a one-time range
    # named like it (``STARTUP_WORDS``) ended there; with steps, the work before the first
    # step when it spans more than the longest steady step. Its span (first operation to the
    # first window) is in ``startup_ns``; the one-time range it ran in, if any.
    startup_before_ns: int = 0
    startup_range: str = ""
    # Per busy kind that compute could hide (copies, communication): the most of it that
    # overlap could hide, step by step the lesser of its exposed time and the step's compute
    # time not already running under that kind's work.
    hideable_ns: dict[str, int] = field(default_factory=dict)
    # The steady steps' host-to-device copy time by the NVTX range its call was issued in.
    copy_ranges: tuple[Detail, ...] = ()
    htod: HtodCopies = field(default_factory=HtodCopies)
    # Only when asked for (``analyze_account(idle_spans=True)``): the steady steps' idle
    # pieces with their causes, for what held the thread then (``python_frames``); not part
    # of the JSON.
    idle_spans: IdleSpans | None = None
    periodic: PeriodicSteps | None = None
    thread_id: int = -1  # the globalTid of ``thread``; -1 when no thread is known
    # The steady steps' idle stretches longer than ``min_gap_ns`` (``analyze_account``), with
    # their causes, for the gap tables; not part of the JSON (``gaps.py`` lists them).
    idle_gaps: IdleGaps | None = None

    def bucket(self, name: str) -> Bucket | None:
        return next((b for b in self.buckets if b.name == name), None)

    def normal_view(self) -> Account:
        """This account as the rules weigh it: with periodic steps, their excess apart
        (``PeriodicSteps.normal_buckets``); else itself."""
        p = self.periodic
        if p is None:
            return self
        return replace(self, buckets=p.normal_buckets, hideable_ns=p.normal_hideable_ns)

    @property
    def stepped(self) -> bool:
        """Windows are the loop's steps, not equal windows over the GPU work."""
        return not self.windows.startswith(EQUAL_WINDOWS)

    def ns(self, name: str) -> int:
        b = self.bucket(name)
        return b.total_ns if b else 0


@dataclass(frozen=True)
class CommunicationOps:
    """NCCL operations by start: start and end (the report's clock), collective name; and
    every window of the account (its NVTX steps when ``stepped``), not only those listed."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    collective: np.ndarray  # object array of names
    window_start_ns: np.ndarray
    window_end_ns: np.ndarray
    window_names: np.ndarray
    stepped: bool

    def __len__(self) -> int:
        return int(self.start_ns.size)


@dataclass(frozen=True)
class AccountResult(Tables):
    TABLES = {"accounts": Account}

    accounts: tuple[Account, ...]
    primary: int  # the account the verdict reads: the one with the most GPU busy time
    left_out: int = 0  # (process, GPU) pairs past MAX_ACCOUNTS, with the least GPU work

    @property
    def main(self) -> Account | None:
        return self.accounts[self.primary] if self.accounts else None
