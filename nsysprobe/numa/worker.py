"""A DataLoader ``worker_init_fn`` that re-applies a binding in each worker process.

Workers started by fork inherit the parent's CPU affinity but not always its threads' binding
(OpenMP pools are recreated), and workers started by spawn or forkserver inherit whatever the
server process had. Re-binding at worker start makes all three the same. The user's own
``worker_init_fn`` still runs, after the binding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nsysprobe.numa.bind import Binding, apply_binding


@dataclass(frozen=True)
class NumaWorkerInit:
    """``DataLoader(worker_init_fn=NumaWorkerInit(binding, user_fn))``; picklable if user_fn is."""

    binding: Binding
    then: Callable[[int], object] | None = None

    def __call__(self, worker_id: int) -> None:
        apply_binding(self.binding)
        if self.then is not None:
            self.then(worker_id)
