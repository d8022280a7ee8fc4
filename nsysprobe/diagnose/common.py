"""What every rule module of the diagnosis shares: the evidence it reads, what a rule finds
(``Outcome``) and the recommendation its row (``Rule``) makes of it, the floors every rule
shares, and the helpers that write a rule's reason and evidence from the step account's
buckets (``rec``, ``bucket_evidence``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from nsysprobe.analyses.account import Account
from nsysprobe.analyses.arrivals import Arrivals
from nsysprobe.analyses.health import Finding
from nsysprobe.analyses.kernels import KernelsResult
from nsysprobe.analyses.step_patterns import StepPatterns
from nsysprobe.analyses.transfers import TransfersResult
from nsysprobe.diagnose.pages import PAGES, Page

if TYPE_CHECKING:
    from nsysprobe.analyses.cpu_placement import CpuPlacementResult
    from nsysprobe.analyses.python_frames import PythonFrames

MIN_GAIN_RATIO = 0.03


GPU_BOUND_IDLE_RATIO = 0.10


@dataclass(frozen=True)
class Recommendation:
    id: str
    title: str
    reason: str
    expected_gain_ratio: float  # share of the measured time the fix would save, in [0, 1]
    saved_ns: int
    advice: str
    evidence: dict[str, float | int | str] = field(default_factory=dict)
    thresholds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """What a rule's check found: a ``Recommendation`` but for its id, which its row gives."""

    title: str
    reason: str
    expected_gain_ratio: float  # share of the measured time the fix would save, in [0, 1]
    saved_ns: int
    advice: str
    evidence: dict[str, float | int | str] = field(default_factory=dict)
    thresholds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Evidence:
    """What the diagnosis reads; each part may be missing (None)."""

    account: Account | None
    transfers: TransfersResult | None
    placement: CpuPlacementResult | None
    health: tuple[Finding, ...]
    # A report holding every rank: all its accounts, and the ranks' arrivals at collectives.
    accounts: tuple[Account, ...] = ()
    arrivals: Arrivals | None = None
    # The main account's kernels by class, and the lever a GPU-bound loop has.
    kernels: KernelsResult | None = None
    # Patterns across the main account's steps: kernels never repeated, workers born.
    step_patterns: StepPatterns | None = None
    # The Python function and line behind each idle bucket, from Python sampling.
    python_frames: PythonFrames | None = None


@dataclass(frozen=True)
class Rule:
    """One recommendation, declared as a row of ``rules.RULES``: its stable id (scripts rely
    on it), its meaning (the line ``nsysprobe explain`` and the README's table show), and its
    check, which reads the evidence and the step account's view of the steady steps
    (``Account``) and says what it found, or None. A row without a check is made by
    ``rules.diagnose`` itself (what the steps it leaves out cost, the verdict when no rule
    leads, the capture). Its page, ``pages.PAGES[id]``, says when it fires, the buckets it
    reads, the evidence it writes, and the fix."""

    id: str
    summary: str
    check: Callable[[Evidence, Account], Outcome | None] | None = None

    @property
    def page(self) -> Page:
        return PAGES[self.id]

    def made(self, found: Outcome) -> Recommendation:
        """``found`` as this rule's recommendation."""
        return Recommendation(self.id, **{f.name: getattr(found, f.name) for f in fields(found)})

    def run(self, ev: Evidence, a: Account) -> Recommendation | None:
        found = self.check(ev, a) if self.check is not None else None
        return None if found is None else self.made(found)


def ratio(ns: float, base: int) -> float:
    return max(0.0, min(1.0, ns / base)) if base else 0.0


def ms_text(ns: float) -> str:
    return f"{ns / 1e6:,.1f} ms"


def top(a: Account, *names: str, n: int = 3) -> str:
    details = sorted(
        (d for name in names if (b := a.bucket(name)) for d in b.details), key=lambda d: -d.ns
    )
    return ", ".join(f"{d.name} {ms_text(d.ns)}" for d in details[:n]) or "none recorded"


def bucket_evidence(a: Account, *names: str, **extra) -> dict:
    out: dict[str, float | int | str] = {
        "account": f"process {a.pid}, GPU {a.device_id}",
        "steps": a.step_count,
        "measured_ns": a.wall_ns,
        "buckets": ", ".join(names),
    }
    for name in names:
        out[f"{name}_ns"] = a.ns(name)
        b = a.bucket(name)
        out[f"{name}_median_per_step_ns"] = b.median_ns if b else 0
    out["details"] = top(a, *names)
    out.update(extra)
    return out


def rec(
    a: Account,
    title: str,
    names: tuple[str, ...],
    reason: str,
    advice: str,
    saved: float | None = None,
    **extra,
) -> Outcome | None:
    """What a rule that reads the buckets ``names`` found: at most their time saved, the
    evidence ``bucket_evidence`` writes (and ``extra``), and the floor every rule shares."""
    total = sum(a.ns(n) for n in names)
    saved = total if saved is None else min(saved, total)
    if saved <= 0:
        return None
    return Outcome(
        title=title,
        reason=reason,
        expected_gain_ratio=ratio(saved, a.wall_ns),
        saved_ns=int(saved),
        advice=advice,
        evidence=bucket_evidence(a, *names, **extra),
        thresholds={"min_gain_ratio": MIN_GAIN_RATIO},
    )


def share_text(a: Account, *names: str) -> str:
    return f"{ratio(sum(a.ns(n) for n in names), a.wall_ns):.0%}"


def detail_names(a: Account, *buckets: str) -> list[str]:
    return [d.name for b in buckets if (bucket := a.bucket(b)) for d in bucket.details]
