"""NUMA awareness: topology, torchrun-compatible plans, binding, placement reports, launching.

The package never imports torch: workers are bound through a plain callable, and GPUs are
found through sysfs or recorded ``nvidia-smi topo -m`` output.
"""

from nsysprobe.numa.bind import Binding, BindOutcome, NumaBindingWarning, apply_binding
from nsysprobe.numa.launch import launch
from nsysprobe.numa.placement import Placement, PlacementReport, placement
from nsysprobe.numa.plan import MODES, Plan, RankPlan, plan
from nsysprobe.numa.rank import bind_local_rank, binding_for_rank
from nsysprobe.numa.recorded import load_recorded
from nsysprobe.numa.topology import Cpu, Gpu, NumaNode, Topology, cpu_to_node, discover
from nsysprobe.numa.worker import NumaWorkerInit

__all__ = [
    "MODES",
    "Binding",
    "BindOutcome",
    "Cpu",
    "Gpu",
    "NumaBindingWarning",
    "NumaNode",
    "NumaWorkerInit",
    "Placement",
    "PlacementReport",
    "Plan",
    "RankPlan",
    "Topology",
    "apply_binding",
    "bind_local_rank",
    "binding_for_rank",
    "cpu_to_node",
    "discover",
    "launch",
    "load_recorded",
    "placement",
    "plan",
]
