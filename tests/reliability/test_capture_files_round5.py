"""Issue 33: what the export and the run folder write, and what they leave.

- A run folder holding captures of different ages: the newest wins (by modification time),
  nothing is deleted that was not imported into a report that now exists, and a newest
  capture that cannot be finished is an error naming the command that finishes it, never a
  silent analysis of an older one.
- The export cache (used when a report's folder cannot be written) is keyed by the report's
  bytes, not by its name, size and time.
- ``X.sqlite`` beside ``X.nsys-rep`` is replaced only when nsysprobe made it as the export of
  that report: a FIFO, a device, a symbolic link, the user's own database or an export of
  another report is left as it is, the export goes to the cache, and one line says so.

Every capture here is a real one, made by the nsys that scripts/setup.sh installs; the
streams are real ``.qdstrm`` files, left by an importer that cannot load (``nsys_without_libssh``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsysprobe.capture.export import ensure_sqlite
from nsysprobe.capture.locate import find_importer
from nsysprobe.capture.profile import ProfileOptions, capture
from nsysprobe.capture.runfolder import run_folder_sqlite
from nsysprobe.cli import main
from nsysprobe.errors import CaptureError, ImporterLoadError

from .checks import check_outcome, folder_state

STEPS = "import time\nimport nvtx\nfor i in range({n}):\n    with nvtx.annotate(f'{name} {{i}}'):\n"
STEPS += "        time.sleep(0.02)\n"
HOUR_NS = 3600 * 10**9


def _script(folder: Path, name: str, n: int) -> Path:
    path = folder / f"{name.replace(' ', '_')}.py"
    path.write_text(STEPS.format(n=n, name=name), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def old_run(tmp_path_factory, nsys) -> Path:
    """A finished run folder (report.nsys-rep, report.sqlite) of three ``old step`` ranges."""
    root = tmp_path_factory.mktemp("old")
    folder = root / "run"
    capture([str(_script(root, "old step", 3))], folder, ProfileOptions(), str(nsys.path))
    return folder


@pytest.fixture(scope="module")
def new_stream(tmp_path_factory, nsys_without_libssh) -> Path:
    """A real report.qdstrm of two ``new step`` ranges, which nsys could not import."""
    root = tmp_path_factory.mktemp("new")
    folder = root / "run"
    with pytest.raises(ImporterLoadError):
        capture(
            [str(_script(root, "new step", 2))],
            folder,
            ProfileOptions(),
            str(nsys_without_libssh),
        )
    return folder / "report.qdstrm"


@pytest.fixture(scope="module")
def new_run(tmp_path_factory, new_stream, nsys) -> Path:
    """The ``new step`` capture finished: its report and export."""
    folder = tmp_path_factory.mktemp("new-finished") / "run"
    shutil.copytree(new_stream.parent, folder)
    run_folder_sqlite(folder, nsys=str(nsys.path))
    return folder


def _place(folder: Path, files: dict[str, tuple[Path, int]]) -> Path:
    """``folder`` holding a copy of each source under its name, written ``age_ns`` ago."""
    folder.mkdir(exist_ok=True)
    now = time.time_ns()
    for name, (source, age_ns) in files.items():
        shutil.copyfile(source, folder / name)
        os.utime(folder / name, ns=(now - age_ns, now - age_ns))
    return folder


def _analyze(path: Path, nsys: Path | str):
    result = CliRunner().invoke(
        main,
        ["analyze", str(path), "--format", "json", "--no-history", "--nsys", str(nsys)],
        catch_exceptions=True,
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    check_outcome(result.exit_code, result.stdout, result.stderr, "json", str(path))
    return result


def _lines(result, prefix: str) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith(prefix)]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- 1. the newest capture in a run folder wins ---------------------------------------------


@pytest.mark.parametrize("older", [("report.nsys-rep", "report.sqlite"), ("report.sqlite",)])
def test_a_newer_qdstrm_is_finished_and_analyzed_and_the_older_capture_kept(
    older, old_run, new_stream, nsys, tmp_path
):
    folder = _place(
        tmp_path / "run",
        {
            **{name: (old_run / name, 2 * HOUR_NS) for name in older},
            "report.qdstrm": (new_stream, 0),
        },
    )
    kept = _sha256(folder / older[0])
    result = _analyze(folder, nsys.path)
    assert result.exit_code == 0, result.stderr
    assert "new step 1" in result.stdout and "old step" not in result.stdout
    # The stream was imported into a report that now exists: only then is it gone.
    assert not (folder / "report.qdstrm").exists()
    report, sqlite = folder / "report.nsys-rep", folder / "report.sqlite"
    assert sqlite.stat().st_mtime_ns > report.stat().st_mtime_ns
    # The older capture is not lost: its report (or its export, when that is all there is
    # of it) is kept under a name of its own, and a note says where.
    suffix = Path(older[0]).suffix
    [aside] = [p for p in folder.glob(f"report-*{suffix}") if _sha256(p) == kept]
    [note] = _lines(result, "nsysprobe: note: ")
    assert note.endswith(f" is kept as {aside}"), note


@pytest.mark.parametrize("older", [("report.nsys-rep", "report.sqlite"), ("report.sqlite",)])
def test_a_newer_qdstrm_that_cannot_be_finished_is_an_error_not_the_older_capture(
    older, old_run, new_stream, nsys_without_libssh, tmp_path
):
    folder = _place(
        tmp_path / "run",
        {
            **{name: (old_run / name, 2 * HOUR_NS) for name in older},
            "report.qdstrm": (new_stream, 0),
        },
    )
    before = folder_state(folder)
    result = _analyze(folder, nsys_without_libssh)
    assert result.exit_code == 2
    [error] = _lines(result, "nsysprobe: error: ")
    qdstrm = folder / "report.qdstrm"
    assert f"cannot load libssh.so, so {qdstrm} (kept) was not turned into a report" in error
    assert error.endswith(
        f", then run: nsysprobe analyze {folder}; report.qdstrm is the newest capture in "
        f"{folder}, so the older {older[0]} was not analyzed instead"
    )
    after = folder_state(folder)
    after.pop("nsys.log")  # the importer's output, kept for the user
    assert after == before


def test_an_older_qdstrm_never_imported_into_the_report_is_kept(
    old_run, new_stream, nsys, tmp_path
):
    """A stream from an earlier capture beside a newer report made without it: the report
    is analyzed, and the stream, whose capture exists nowhere else, stays."""
    folder = _place(
        tmp_path / "run",
        {
            "report.qdstrm": (new_stream, 2 * HOUR_NS),
            "report.nsys-rep": (old_run / "report.nsys-rep", HOUR_NS),
            "report.sqlite": (old_run / "report.sqlite", HOUR_NS // 2),
        },
    )
    stream = folder / "report.qdstrm"
    digest = _sha256(stream)
    result = _analyze(folder, nsys.path)
    assert result.exit_code == 0, result.stderr
    assert "old step 2" in result.stdout and "new step" not in result.stdout
    assert _sha256(stream) == digest
    assert _lines(result, "nsysprobe: note: ") == [
        f"nsysprobe: note: {stream} is older than report.nsys-rep, which is not known to be "
        "made from it, so it is kept and not analyzed; to analyze it, move it into an empty "
        "folder and run nsysprobe analyze on that folder, else delete it"
    ]


def test_a_stream_imported_by_hand_goes_even_when_its_time_equals_the_reports(
    new_stream, nsys, tmp_path
):
    """nsys 2025.3.1's QdstrmImporter leaves the stream and the report with one mtime, to the
    nanosecond (seen on the H200): a tie goes to the report, which says it came from it."""
    folder = _place(tmp_path / "run", {"report.qdstrm": (new_stream, HOUR_NS)})
    stream = folder / "report.qdstrm"
    importer = find_importer(nsys)
    subprocess.run([str(importer), "-i", str(stream)], check=True, capture_output=True)
    report = folder / "report.nsys-rep"
    tie = report.stat().st_mtime_ns
    os.utime(stream, ns=(tie, tie))
    result = _analyze(folder, nsys.path)
    assert result.exit_code == 0, result.stderr
    assert "new step 1" in result.stdout
    assert sorted(p.name for p in folder.iterdir()) == ["report.nsys-rep", "report.sqlite"]


def test_a_stale_export_beside_a_newer_report_is_made_again(old_run, new_run, nsys, tmp_path):
    """report.sqlite older than report.nsys-rep is the export of another capture."""
    folder = _place(
        tmp_path / "run",
        {
            "report.sqlite": (new_run / "report.sqlite", 2 * HOUR_NS),
            "report.nsys-rep": (old_run / "report.nsys-rep", HOUR_NS),
        },
    )
    result = _analyze(folder, nsys.path)
    assert result.exit_code == 0, result.stderr
    assert "old step 2" in result.stdout and "new step" not in result.stdout
    sqlite = folder / "report.sqlite"
    assert sqlite.stat().st_mtime_ns > (folder / "report.nsys-rep").stat().st_mtime_ns
    assert sorted(p.name for p in folder.iterdir()) == ["report.nsys-rep", "report.sqlite"]


# -- 2. the cache is keyed by the report's bytes ----------------------------------------------


@pytest.fixture
def read_only_disk(tmp_path):
    """A small tmpfs, remounted read-only and back with ``remount(mode)``."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip()})")

    def remount(mode: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{mode}", str(mount)], check=True)

    yield mount, remount
    subprocess.run(["umount", str(mount)], check=True)


def test_the_export_cache_is_keyed_by_the_reports_bytes(
    read_only_disk, old_run, nsys, tmp_path, monkeypatch
):
    mount, remount = read_only_disk
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    report = mount / "X.nsys-rep"
    shutil.copy2(old_run / "report.nsys-rep", report)
    stamp = report.stat().st_mtime_ns
    remount("ro")
    first = ensure_sqlite(report, str(nsys.path))
    digest = _sha256(report)
    assert first.parent == tmp_path / "cache" / "nsysprobe"
    # The same bytes again: the cached export is read, no nsys needed.
    assert ensure_sqlite(report, str(tmp_path / "no" / "nsys")) == first
    # A damaged report of the same name, size and time is not the first one.
    remount("rw")
    data = bytearray(report.read_bytes())
    data[len(data) // 2 :] = bytes(len(data) - len(data) // 2)
    report.write_bytes(bytes(data))
    os.utime(report, ns=(stamp, stamp))
    remount("ro")
    assert report.stat().st_size == len(data) and report.stat().st_mtime_ns == stamp
    try:
        second = ensure_sqlite(report, str(nsys.path))
    except CaptureError as exc:
        assert str(exc).startswith(f"nsys export failed on {report}: ")
    else:
        assert second != first
    assert first.name == f"X-{digest}.sqlite"


def test_hashing_a_1_gib_report_holds_a_block_not_the_file(tmp_path):
    """Peak RSS grows by less than 8 MiB while a 1 GiB (sparse) file is hashed."""
    sparse = tmp_path / "big.nsys-rep"
    with sparse.open("wb") as handle:
        handle.truncate(1 << 30)
    # The child's own peak, VmHWM: getrusage's ru_maxrss keeps, across exec, the peak of the
    # process it was forked from (this test process).
    code = (
        "import re, sys\n"
        "from nsysprobe.capture.reportfile import content_digest\n"
        "def peak():\n"
        "    status = open('/proc/self/status').read()\n"
        "    return int(re.search(r'VmHWM:\\s+(\\d+) kB', status).group(1))\n"
        "before = peak()\n"
        "digest = content_digest(sys.argv[1])\n"
        "print(digest, peak() - before)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(sparse)], capture_output=True, text=True, check=True
    )
    digest, grown_kib = done.stdout.split()
    zeros = hashlib.sha256()
    block = bytes(1 << 20)
    for _ in range(1 << 10):
        zeros.update(block)
    assert digest == zeros.hexdigest()
    assert int(grown_kib) < 8 * 1024, f"peak RSS grew by {grown_kib} KiB"


# -- 3. X.sqlite is replaced only when nsysprobe made it as the export of X -----------------


def _user_database(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
        db.execute("INSERT INTO notes VALUES ('mine')")
    db.close()


def _export_of_another_report(path: Path, report: Path, nsys) -> None:
    other = path.parent / "elsewhere" / "Y.nsys-rep"
    other.parent.mkdir()
    shutil.copyfile(report, other)
    os.replace(ensure_sqlite(other, str(nsys.path)), path)


def _occupy(kind: str, path: Path, report: Path, nsys) -> str:
    """Make ``path`` a ``kind`` of thing; return what nsysprobe calls it."""
    if kind == "fifo":
        os.mkfifo(path)
        return "a FIFO"
    if kind == "link to /dev/null":
        path.symlink_to("/dev/null")
        return "a symbolic link"
    if kind == "character device":
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("making a device needs root")
        return "a character device"
    if kind == "link to an older database":
        target = path.parent / "elsewhere.sqlite"
        _user_database(target)
        os.utime(target, ns=(1, 1))
        path.symlink_to(target.name)
        return "a symbolic link"
    if kind == "the user's database":
        _user_database(path)
    elif kind == "export of another report":
        _export_of_another_report(path, report, nsys)
    os.utime(path, ns=(1, 1))  # older than the report: on HEAD, a stale export to replace
    return "a file"


def _identity(path: Path) -> tuple:
    st = path.lstat()
    content = os.readlink(path) if stat.S_ISLNK(st.st_mode) else None
    if stat.S_ISREG(st.st_mode):
        content = _sha256(path)
    return st.st_mode, st.st_ino, st.st_rdev, content


@pytest.mark.parametrize(
    "kind",
    [
        "fifo",
        "link to /dev/null",
        "character device",
        "link to an older database",
        "the user's database",
        "export of another report",
    ],
)
def test_a_sqlite_name_nsysprobe_did_not_write_is_never_replaced(
    kind, old_run, nsys, tmp_path, monkeypatch
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    report = tmp_path / "reports" / "X.nsys-rep"
    report.parent.mkdir()
    shutil.copyfile(old_run / "report.nsys-rep", report)
    sqlite = report.with_suffix(".sqlite")
    what = _occupy(kind, sqlite, report, nsys)
    before = _identity(sqlite)
    result = _analyze(report, nsys.path)
    assert result.exit_code == 0, result.stderr
    assert "old step 2" in result.stdout
    assert _identity(sqlite) == before
    cached = tmp_path / "cache" / "nsysprobe" / f"X-{_sha256(report)}.sqlite"
    assert _lines(result, "nsysprobe: ") == [
        f"nsysprobe: note: {sqlite} is {what}, not an export nsysprobe made of X.nsys-rep, so "
        f"it is left as it is; the export is read from {cached}"
    ]
    assert cached.is_file()
    assert [p.name for p in report.parent.iterdir() if p.name.startswith(".")] == []


def test_a_cache_name_nsysprobe_did_not_write_is_an_error(old_run, nsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    report = tmp_path / "reports" / "X.nsys-rep"
    report.parent.mkdir()
    shutil.copyfile(old_run / "report.nsys-rep", report)
    os.mkfifo(report.with_suffix(".sqlite"))
    cached = tmp_path / "cache" / "nsysprobe" / f"X-{_sha256(report)}.sqlite"
    cached.parent.mkdir(parents=True)
    os.mkfifo(cached)
    with pytest.raises(CaptureError) as caught:
        ensure_sqlite(report, str(nsys.path))
    assert str(caught.value) == (
        f"{cached} is a FIFO, not an export nsysprobe made, so it is left as it is; remove it "
        "and run again, or export the report yourself: "
        "nsys export --type sqlite --output X.sqlite X.nsys-rep"
    )
    assert stat.S_ISFIFO(cached.lstat().st_mode)
