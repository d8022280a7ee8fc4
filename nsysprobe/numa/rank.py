"""Bind the calling process for its local rank, as ``nsysprobe numa exec`` and workloads do."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from nsysprobe.errors import TopologyError
from nsysprobe.numa.bind import MEMORY_POLICIES, Binding, BindOutcome, apply_binding
from nsysprobe.numa.plan import plan, visible_gpus
from nsysprobe.numa.topology import Topology, discover


def local_rank_from(env: Mapping[str, str]) -> int:
    text = env.get("LOCAL_RANK", "0")
    if not text.isdigit():
        raise TopologyError(
            f"LOCAL_RANK={text!r} is not a number: launch with torchrun or nsysprobe launch"
        )
    return int(text)


def binding_for_rank(
    topology: Topology,
    mode: str,
    local_rank: int,
    memory: str = "preferred",
    env: Mapping[str, str] | None = None,
) -> Binding:
    """The binding of ``local_rank`` under ``mode``, honouring ``CUDA_VISIBLE_DEVICES``."""
    if memory not in MEMORY_POLICIES:
        raise TopologyError(
            f"unknown memory policy {memory!r}: use one of {', '.join(MEMORY_POLICIES)}"
        )
    env = os.environ if env is None else env
    indices = visible_gpus(env.get("CUDA_VISIBLE_DEVICES"))
    ranks = plan(topology, mode, nproc=local_rank + 1, gpu_indices=indices).ranks
    chosen = ranks[local_rank]
    return Binding(chosen.cpus, chosen.memory_nodes, memory)


def bind_local_rank(
    mode: str = "node",
    memory: str = "preferred",
    local_rank: int | None = None,
    root: str | Path = "/",
) -> BindOutcome:
    """Discover the machine, plan ``mode`` and bind this process for its ``LOCAL_RANK``."""
    rank = local_rank_from(os.environ) if local_rank is None else local_rank
    binding = binding_for_rank(discover(root), mode, rank, memory)
    return apply_binding(binding)
