from __future__ import annotations

import pytest

from nsysprobe.capture.importer import finish_qdstrm, importer_status, missing_library
from nsysprobe.capture.locate import probe
from nsysprobe.errors import CaptureError, ImporterLoadError

from .capture_helpers import write_fake


def test_real_importer_loads(nsys):
    status = importer_status(nsys)
    assert status.loads, status.detail
    assert status.missing_library is None


def test_importer_without_libssh_is_named(nsys_without_libssh):
    status = importer_status(probe(nsys_without_libssh))
    assert not status.loads
    assert status.missing_library == "libssh.so"


def test_finishing_with_an_importer_that_cannot_load_keeps_the_qdstrm(
    nsys_without_libssh, tmp_path
):
    qdstrm = tmp_path / "run.qdstrm"
    qdstrm.write_bytes(b"captured bytes")
    log = tmp_path / "nsys.log"
    broken = probe(nsys_without_libssh)
    with pytest.raises(ImporterLoadError) as caught:
        finish_qdstrm(qdstrm, broken, log)
    importer = nsys_without_libssh.parents[1] / "host-linux-x64" / "QdstrmImporter"
    assert str(caught.value) == (
        f"QdstrmImporter ({importer}) cannot load libssh.so, so {qdstrm} (kept) was not turned "
        "into a report; put a folder holding libssh.so on LD_LIBRARY_PATH "
        "(LD_LIBRARY_PATH=/path/to/lib nsysprobe ...) or install the package that ships it, "
        f"then run: {importer} -i {qdstrm}"
    )
    assert qdstrm.read_bytes() == b"captured bytes"
    assert "libssh.so: cannot open shared object file" in log.read_text()


def test_a_crashing_importer_keeps_the_qdstrm(tmp_path):
    nsys = write_fake(
        tmp_path / "kit" / "target-linux-x64" / "nsys",
        "echo 'NVIDIA Nsight Systems version 2023.4.4.54-234433681190v0'\n",
    )
    write_fake(tmp_path / "kit" / "host-linux-x64" / "QdstrmImporter", "echo boom >&2\nexit 134\n")
    qdstrm = tmp_path / "run.qdstrm"
    qdstrm.write_bytes(b"x")
    with pytest.raises(CaptureError) as caught:
        finish_qdstrm(qdstrm, probe(nsys))
    assert str(caught.value).startswith(f"QdstrmImporter failed on {qdstrm} (kept): boom; ")
    assert qdstrm.exists()


def test_missing_library_reads_the_loader_error():
    line = "QdstrmImporter: error while loading shared libraries: libdw.so.1: cannot open"
    assert missing_library(line) == "libdw.so.1"
    assert missing_library("Importer error status: An unknown error occurred.") is None
