"""The one exception hierarchy of nsysprobe.

The library raises these; the CLI turns each into a one-line message and an exit code in one
place (``nsysprobe.cli``). Every message says what went wrong, where, and the fix.
"""

from __future__ import annotations


class NsysprobeError(Exception):
    """Base of every error nsysprobe reports to a user. ``exit_code`` is what the CLI exits with."""

    exit_code = 2


class InputError(NsysprobeError):
    """A path the user gave is missing, unreadable or not what it claims to be."""


class TraceError(NsysprobeError):
    """A trace could be opened but not read as an Nsight Systems export."""


class NsysNotFound(NsysprobeError):
    """No usable nsys was found where one is needed."""


class NsysTooOld(NsysprobeError):
    """The nsys found cannot read a report made by a newer nsys."""


class CaptureError(NsysprobeError):
    """Profiling, importing or exporting with nsys failed."""


class MissingDependency(NsysprobeError, ImportError):
    """An optional package a feature needs is not installed; the message names the extra."""


class TopologyError(NsysprobeError):
    """The CPU/NUMA/GPU topology could not be read or planned for."""


class InstallError(NsysprobeError):
    """Installing Nsight Systems (``nsysprobe doctor --install``) failed."""


class ImporterLoadError(CaptureError):
    """nsys's QdstrmImporter cannot start because a shared library it needs is missing."""


class NothingCaptured(CaptureError):
    """nsys produced no report; ``exit_code`` is the workload's when it failed, else 2."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code
