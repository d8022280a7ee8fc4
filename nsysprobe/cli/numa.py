"""``nsysprobe topo``, ``nsysprobe numa ...`` and ``nsysprobe launch``: NUMA topology, plans,
binding and placement. Each command parses, calls ``nsysprobe.numa`` and prints."""

from __future__ import annotations

import os
import sys

import click

from nsysprobe.cli import echo
from nsysprobe.cli.options import format_option
from nsysprobe.errors import TopologyError
from nsysprobe.numa.bind import MEMORY_POLICIES, apply_binding
from nsysprobe.numa.launch import launch as launch_ranks
from nsysprobe.numa.placement import placement as placement_report
from nsysprobe.numa.plan import MODES
from nsysprobe.numa.plan import plan as make_plan
from nsysprobe.numa.rank import binding_for_rank, local_rank_from
from nsysprobe.numa.recorded import load_recorded
from nsysprobe.numa.render import PLACEMENT_RENDERERS, PLAN_RENDERERS, TOPOLOGY_RENDERERS
from nsysprobe.numa.topology import Topology, discover
from nsysprobe.render import render_as

_root = click.option(
    "--root",
    default="/",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Folder holding the sys/ and proc/ to read (a saved tree, or / for this machine).",
)
_from = click.option(
    "--from",
    "from_dir",
    type=click.Path(exists=True, file_okay=False),
    help="Folder of recorded lscpu.txt, numactl-hardware.txt, nvidia-smi-topo-m.txt.",
)
_mode = click.option("--mode", type=click.Choice(MODES), default="node", show_default=True)
_memory = click.option(
    "--memory",
    type=click.Choice(MEMORY_POLICIES),
    default="preferred",
    show_default=True,
    help="Memory policy: prefer the bound nodes, allocate only there, or leave it alone.",
)


def _topology(root: str, from_dir: str | None) -> Topology:
    return load_recorded(from_dir) if from_dir else discover(root)


@click.command()
@_root
@_from
@format_option(TOPOLOGY_RENDERERS)
def topo(root: str, from_dir: str | None, fmt: str) -> None:
    """Show NUMA nodes, their CPUs and memory, and each GPU's node.

    Inside a Slurm job or container, also which GPUs' nodes have no CPU in its cpuset:
    binding to those nodes is impossible there."""
    echo(render_as(TOPOLOGY_RENDERERS, _topology(root, from_dir), fmt))


@click.group()
def numa() -> None:
    """Plan, apply and check NUMA binding of training processes."""


@numa.command()
@_mode
@click.option("--nproc-per-node", type=int, help="Ranks to plan for (default: one per GPU).")
@_root
@_from
@format_option(PLAN_RENDERERS)
def plan(mode: str, nproc_per_node: int | None, root: str, from_dir: str | None, fmt: str) -> None:
    """The CPUs each local rank gets, as torchrun --numa-binding MODE would bind them.

    A rank whose GPU's node has no CPU in this job's cpuset (a Slurm job given CPUs of other
    nodes) is shown unbound, with the reason."""
    result = make_plan(_topology(root, from_dir), mode, nproc_per_node)
    echo(render_as(PLAN_RENDERERS, result, fmt))


@numa.command(name="exec", context_settings={"ignore_unknown_options": True})
@_mode
@_memory
@click.option("--local-rank", type=int, help="Rank to bind for (default: $LOCAL_RANK, else 0).")
@_root
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_(
    mode: str, memory: str, local_rank: int | None, root: str, command: tuple[str, ...]
) -> None:
    """Bind for LOCAL_RANK, then exec COMMAND (use under torchrun --no-python).

    When the GPU's node has no CPU in this job's cpuset, COMMAND runs unbound (the reason
    is printed)."""
    rank = local_rank_from(os.environ) if local_rank is None else local_rank
    binding = binding_for_rank(discover(root), mode, rank, memory)
    echo(f"nsysprobe: rank {rank}: {binding.describe()}", err=True)
    apply_binding(binding)
    sys.stdout.flush()
    try:
        os.execvp(command[0], command)
    except FileNotFoundError:
        raise TopologyError(f"cannot run {command[0]!r}: not found on PATH") from None
    except OSError as exc:
        raise TopologyError(
            f"cannot run {command[0]!r} ({exc.strerror}): give a program you may execute"
        ) from None


@numa.command()
@click.argument("pid", type=int)
@click.option("--gpu", type=int, help="GPU the process drives (default: from its LOCAL_RANK).")
@_root
@format_option(PLACEMENT_RENDERERS)
def placement(pid: int, gpu: int | None, root: str, fmt: str) -> None:
    """Where PID, its children and their threads run and keep memory, against their GPU."""
    report = placement_report(pid, discover(root), root=root, gpu=gpu)
    echo(render_as(PLACEMENT_RENDERERS, report, fmt))


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("--nproc-per-node", type=int, required=True, help="Ranks to start on this machine.")
@click.option(
    "--numa",
    "mode",
    type=click.Choice([*MODES, "none"]),
    default="node",
    show_default=True,
    help="Binding mode for each rank, or none.",
)
@_memory
@click.option("--master-addr", default="127.0.0.1", show_default=True)
@click.option("--master-port", type=int, help="Rendezvous port (default: a free one).")
@_root
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def launch(
    nproc_per_node: int,
    mode: str,
    memory: str,
    master_addr: str,
    master_port: int | None,
    root: str,
    command: tuple[str, ...],
) -> None:
    """Start N ranks of COMMAND with torchrun's environment, each bound before it starts.

    A rank whose GPU's node has no CPU in this job's cpuset starts unbound (the reason is
    printed)."""
    topology = None if mode == "none" else discover(root)
    code = launch_ranks(
        command,
        nproc_per_node,
        topology=topology,
        mode=None if mode == "none" else mode,
        memory=memory,
        master_addr=master_addr,
        master_port=master_port,
    )
    sys.exit(code)


numa.add_command(launch)
