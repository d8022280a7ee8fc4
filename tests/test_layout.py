"""The layout is the architecture: capture -> trace -> analyses -> diagnosis -> report ->
render, each stage a folder, imports flowing one way, and the README's layout section the
tree as it is."""

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "nsysprobe"
README = Path(__file__).parents[1] / "README.md"

# Each stage may import its own and the stages of a lower rank, never a higher one.
RANK = {
    "errors": 0,
    "common": 0,
    "trace": 1,
    "numa": 1,
    "capture": 2,
    "analyses": 3,
    "diagnose": 4,
    "report": 5,
    "runs": 6,
    "ranks": 6,
    "ladder": 6,
    "workloads": 6,
    "render": 7,
    "cli": 8,
    "": 9,  # the package itself: ``nsysprobe.analyze`` and friends
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, set[str]]:
    """module -> the nsysprobe modules it imports, at the top or inside a function."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    out: dict[str, set[str]] = {}
    for mod, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                # ``from nsysprobe.runs import history`` imports a module; ``from
                # nsysprobe.report.analyze import analyze`` a name of one.
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    found.add(sub if sub in modules else node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
        out[mod] = {m for m in found if m in modules and m != mod}
    return out


def stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_folder_is_a_stage_with_a_rank():
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    top = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    assert folders | top == set(RANK) - {"", "workloads"}


def test_imports_flow_one_way():
    wrong = [
        f"{src} -> {dst}"
        for src, targets in imports().items()
        for dst in targets
        if stage(src) != "__main__" and RANK[stage(dst)] > RANK[stage(src)]
    ]
    assert wrong == []


def test_only_the_command_line_imports_render():
    wrong = [
        f"{src} -> {dst}"
        for src, targets in imports().items()
        for dst in targets
        if stage(dst) == "render" and stage(src) not in ("render", "cli")
    ]
    assert wrong == []


def test_the_import_graph_has_no_cycle():
    graph = imports()
    state: dict[str, int] = {}  # 1: on the path, 2: done
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(path[path.index(nxt) :] + [nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert cycles == []


def test_the_readme_layout_is_the_tree():
    section = README.read_text(encoding="utf-8").split("## Layout", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\s{4}nsysprobe/(\w+)/", section, re.M))
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert listed == folders


def test_a_module_over_500_lines_says_why_at_its_top():
    """Issue 30: no engine-sized module without a reason written where a reader starts."""
    long = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) > 500:
            long[path.relative_to(PACKAGE).as_posix()] = lines[:3]
    assert long  # the check reads real modules
    unexplained = [
        name for name, head in long.items() if not re.match(r"# Over 500 lines: \w", head[0])
    ]
    assert unexplained == []
