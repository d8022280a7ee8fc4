"""Copy/compute overlap: how much host-to-device copy time ran while kernels ran.

Per device, with **unions** on both sides: ``htod_ns`` is the union of HtoD copies,
``overlapped_ns`` its intersection with the union of kernels, ``exposed_ns`` the rest: copy
time during which no kernel ran, which a copy stream or a prefetcher can hide.

    kernels  [=======)   [=======)   [=======)
    HtoD             [==)        [==)         (serialized: all exposed)
    HtoD       [==)        [==)               (pipelined: all overlapped)
"""

from __future__ import annotations

from dataclasses import dataclass

from nsysprobe.analyses.events import Events
from nsysprobe.common.frames import Tables


@dataclass(frozen=True)
class DeviceOverlap:
    device_id: int
    htod_ns: int  # union of HtoD copies
    overlapped_ns: int  # of which kernels ran at the same time
    exposed_ns: int  # htod_ns - overlapped_ns
    overlap_ratio: float  # overlapped_ns / htod_ns


@dataclass(frozen=True)
class OverlapResult(Tables):
    TABLES = {"devices": DeviceOverlap}

    devices: tuple[DeviceOverlap, ...]
    htod_ns: int
    overlapped_ns: int
    exposed_ns: int
    overlap_ratio: float


def analyze_overlap(events: Events) -> OverlapResult:
    devices = []
    for dev in events.device_ids:
        total = events.device_time(dev, "htod")
        both = events.device_time(dev, "htod_under_kernels")
        devices.append(
            DeviceOverlap(
                device_id=dev,
                htod_ns=total,
                overlapped_ns=both,
                exposed_ns=total - both,
                overlap_ratio=both / total if total else 0.0,
            )
        )
    htod = sum(d.htod_ns for d in devices)
    both = sum(d.overlapped_ns for d in devices)
    return OverlapResult(
        devices=tuple(devices),
        htod_ns=htod,
        overlapped_ns=both,
        exposed_ns=htod - both,
        overlap_ratio=both / htod if htod else 0.0,
    )
