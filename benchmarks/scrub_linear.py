"""Whether ``scrub_text`` is linear in its text's length on texts built to make it quadratic.

Each case is a text of N characters and of 4 N characters of one shape (a run of dashes after
``token``, ``-$`` alternating, a unit that opens a rule repeated, ...); each is scrubbed
``--repeat`` times in this process and the fastest time kept. A linear scrub takes about 4
times as long on 4 N as on N; a quadratic one 16 times. The ratio is what the table gives,
not a time to meet: the machine's speed cancels out of it.

    .venv/bin/python benchmarks/scrub_linear.py                    # N = 256 KiB, 4 N = 1 MiB
    .venv/bin/python benchmarks/scrub_linear.py --sizes 16384 --against fdb0884 --cases dashes

``--against REV`` also times the scrubber (``nsysprobe/trace/secrets/``, one file
``secrets.py`` before it was split) as it was at the git revision ``REV``, loaded beside the
current one, in the same process and on the same texts: the before/after of a change. A case
whose N took that code longer than ``--budget`` / 16 seconds is not run at 4 N (a quadratic
scrub of 1 MiB of dashes takes hours).
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nsysprobe.trace.secrets import scrubber  # noqa: E402

KEY = b"k" * 32


def _repeated(head: str, unit: str):
    return lambda n: head + (unit * (n // len(unit) + 1))[: n - len(head)]


# name -> a text of about n characters. Each unit opens a rule (a name, a separator, a quote,
# a bracket, a token's prefix, a tool, an element, an encoded separator) that a run of it must
# not make read again from every position.
CASES = {
    "dashes": _repeated("token ", "-"),
    "dash-dollar": _repeated("token ", "-$"),
    "dollar-dash": _repeated("token ", "$-"),
    "names": _repeated("", "token-"),
    "separators": _repeated("password ", "= "),
    "quotes": _repeated('token="a ', '"a '),
    "quoted-names": _repeated("", '"token", '),
    "brackets": _repeated("", "key("),
    "index": _repeated("", "keys["),
    "elements": _repeated("", "<password "),
    "tools": _repeated("", "curl -su "),
    "htpasswd": _repeated("htpasswd ", "-b "),
    "encoded": _repeated("token", "%3D"),
    "undecoded": _repeated("password", "\ufffd"),
    "zero-width": _repeated("pass", "\u200b"),
    "block-scalar": _repeated("", "token: |\n"),
    "token-breaks": _repeated("ghp_aB3dE5fG", " aB3d"),
    "recased": _repeated("", "Akia1b2c "),
    "triton": _repeated("triton_", "0d1d"),
    "base64": _repeated("step 1 ", "Zm9vYmFy+/"),
    "hosts": _repeated("", "a.b.c.d.e.com-"),
    "paths": _repeated("", "</s"),
}


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout


def _secrets_at(rev: str):
    """The scrubber as it was at git revision ``rev``, as a module of its own."""
    files = _git("ls-tree", "--name-only", rev, "nsysprobe/trace/secrets/").split()
    if files:
        return _package_at(rev, files)
    source = _git("show", f"{rev}:nsysprobe/trace/secrets.py")
    path = Path(tempfile.mkdtemp()) / f"secrets_{rev}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"secrets_{rev}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _package_at(rev: str, files: list[str]):
    """``secrets.scrubber`` of the package ``files`` at ``rev``: imported from a folder of
    them put in the package's place for the while, the current modules put back after."""
    folder = Path(tempfile.mkdtemp())
    for name in files:
        (folder / Path(name).name).write_text(_git("show", f"{rev}:{name}"))
    package = sys.modules["nsysprobe.trace.secrets"]
    prefix = "nsysprobe.trace.secrets."
    saved = {k: m for k, m in sys.modules.items() if k.startswith(prefix)}
    path, attrs = package.__path__, dict(vars(package))
    try:
        for name in saved:
            del sys.modules[name]
        package.__path__ = [str(folder)]
        return importlib.import_module(prefix + "scrubber")
    finally:
        for name in [k for k in sys.modules if k.startswith(prefix)]:
            del sys.modules[name]
        sys.modules.update(saved)
        package.__path__ = path
        vars(package).update(attrs)


def _fastest(module, text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        scrub = module.Scrubber(KEY)  # a cold cache each time
        started = time.perf_counter()
        scrub(text)
        best = min(best, time.perf_counter() - started)
    return best


def _row(name: str, n: int, modules: dict, repeat: int, budget: float) -> list[str]:
    cells = [name, f"{n:,}"]
    for label, module in modules.items():
        small = _fastest(module, CASES[name](n), repeat)
        if label != "now" and small > budget / 16:
            cells += [f"{small:.3f}", "not run", "-"]
            continue
        large = _fastest(module, CASES[name](4 * n), repeat)
        cells += [f"{small:.3f}", f"{large:.3f}", f"{large / max(small, 1e-6):.1f}"]
    return cells


@click.command()
@click.option("--sizes", default="262144", show_default=True, help="N, comma-separated.")
@click.option("--cases", default=",".join(CASES), help="Which cases, comma-separated.")
@click.option("--repeat", default=3, show_default=True, help="Runs per text; the fastest counts.")
@click.option("--against", default=None, help="Also time the scrubber of this git revision.")
@click.option("--budget", default=120.0, show_default=True, help="Seconds (see above).")
def main(sizes: str, cases: str, repeat: int, against: str | None, budget: float) -> None:
    modules = {"now": scrubber}
    if against:
        modules[against] = _secrets_at(against)
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    click.echo(f"{when}, Python {platform.python_version()}, {platform.machine()}\n")
    head = ["case", "N"]
    for label in modules:
        head += [f"{label} N (s)", f"{label} 4N (s)", f"{label} 4N/N"]
    click.echo("| " + " | ".join(head) + " |")
    click.echo("|" + "---|" * len(head))
    for n in (int(s) for s in sizes.split(",")):
        for name in cases.split(","):
            click.echo("| " + " | ".join(_row(name, n, modules, repeat, budget)) + " |")


if __name__ == "__main__":
    main()
