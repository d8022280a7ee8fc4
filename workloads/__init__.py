"""The workloads nsysprobe profiles: the data-loading ladder (``ladder.py``, one script per rung:
``baseline``, ``multiworker``, ``pinned``, ``streams``, ``prefetch``, ``cached``), the training
mistakes (``mistakes.py`` lists them, ``gpu_bound.py`` among them: a GPU-bound loop the CPU
runs ahead of), ``numa_ddp.py`` (DDP with NUMA binding, one rank made slow on demand) and
``nccl_one_rank.py``.

In a checkout they are the repository's ``workloads/``; installed, the same files are the
package ``nsysprobe.workloads`` (``pyproject.toml`` maps the folder), so each runs as a script
(``python workloads/baseline.py``) or a module (``python -m nsysprobe.workloads.baseline``),
and ``nsysprobe run --rung baseline`` and ``nsysprobe ladder`` find them from any directory.
They need the ``workloads`` extra: ``pip install 'nsysprobe[workloads]'`` (torch, torchvision,
nvtx).
"""

from pathlib import Path

FOLDER = Path(__file__).resolve().parent


def script(name: str) -> Path:
    """The file of workload ``name`` (``baseline``, ``readback``, ...)."""
    return FOLDER / f"{name}.py"
