"""How the cross-rank arrival analysis scales with ranks and collectives.

Synthetic collectives, one clock per rank: every collective ends on every rank within 5 us,
each rank arrives up to 100 us apart, one rank 300 us late at half of them; two collective
names; NVTX steps of 8 collectives. Times ``analyze_arrivals`` alone (the per-report analyses
that produce the operations are measured in ``ranks.py`` and ``scale.py``), then its peak
traced memory in a second pass, and checks that the late rank is the straggler.

    .venv/bin/python benchmarks/arrivals.py                  # 2, 8, 64 ranks x 10k, 200k
    .venv/bin/python benchmarks/arrivals.py --ranks 8 --collectives 500000
"""

from __future__ import annotations

import datetime as dt
import sys
import time
import tracemalloc
from pathlib import Path

import click
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ranks import machine  # noqa: E402

from nsysprobe.analyses.arrivals import RankCollectives, analyze_arrivals  # noqa: E402


def job(ranks: int, n: int, seed: int = 0) -> list[RankCollectives]:
    rng = np.random.default_rng(seed)
    base = np.cumsum(rng.integers(500_000, 2_000_000, n))
    names = np.array(["AllReduce", "AllGather"], dtype=object)[rng.integers(0, 2, n)]
    steps = base[::8] - 100_000
    step_end = np.append(steps[1:], base[-1] + 3_000_000)
    slow = ranks // 2
    out = []
    for r in range(ranks):
        late = (rng.random(n) < 0.5) * 300_000 if r == slow else 0
        start = base + rng.integers(0, 100_000, n) + late
        end = base + 2_500_000 + rng.integers(0, 5_000, n)
        out.append(
            RankCollectives(f"rank{r}", f"rank{r}.sqlite", True, start, end, names, steps, step_end)
        )
    return out


@click.command()
@click.option("--ranks", "rank_counts", default="2,8,64", show_default=True)
@click.option("--collectives", "counts", default="10000,200000", show_default=True)
def main(rank_counts: str, counts: str) -> None:
    click.echo(f"`analyze_arrivals` on {machine()}, {dt.date.today().isoformat()}\n")
    click.echo("| ranks | collectives per rank | wall s | peak traced MiB | straggler found |")
    click.echo("|---:|---:|---:|---:|---|")
    for ranks in map(int, rank_counts.split(",")):
        for n in map(int, counts.split(",")):
            if ranks * n > 20_000_000:
                continue
            inputs = job(ranks, n)
            started = time.perf_counter()
            a = analyze_arrivals(inputs)
            wall = time.perf_counter() - started
            # Memory in a second pass: tracing slows numpy's allocations several times over.
            tracemalloc.start()
            analyze_arrivals(inputs)
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            found = a is not None and a.stragglers == (f"rank{ranks // 2}",)
            click.echo(
                f"| {ranks} | {n:,} | {wall:.2f} | {peak:.0f} | {'yes' if found else 'NO'} |"
            )


if __name__ == "__main__":
    main()
