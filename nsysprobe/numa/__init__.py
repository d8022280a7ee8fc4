"""NUMA awareness: topology, torchrun-compatible plans, binding, placement reports, launching.

The package never imports torch: workers are bound through a plain callable, and GPUs are
found through sysfs or recorded ``nvidia-smi topo -m`` output.
"""

from nsysprobe.common.lazy import lazy_exports

_WHERE = {
    **dict.fromkeys(["Binding", "BindOutcome", "NumaBindingWarning", "apply_binding"], "bind"),
    "launch": "launch",
    **dict.fromkeys(["Placement", "PlacementReport", "placement"], "placement"),
    **dict.fromkeys(["MODES", "Plan", "RankPlan", "plan"], "plan"),
    **dict.fromkeys(["bind_local_rank", "binding_for_rank"], "rank"),
    "load_recorded": "recorded",
    **dict.fromkeys(["Cpu", "Gpu", "NumaNode", "Topology", "cpu_to_node", "discover"], "topology"),
    "NumaWorkerInit": "worker",
}
# Imported on first use: the analysis needs the topology module only, not the launcher.
lazy_exports(__name__, _WHERE)

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
