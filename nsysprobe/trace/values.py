"""What one value of an export reads as, and the SQL that reads it so.

An export from a stranger may hold anything in any column: NULL, text where a number belongs, a
BLOB, a REAL, a number out of range. This module answers how each is read: text as a name
(``as_text``), integers (``as_int``, ``lenient_int``), ids that the analyses group or join by
(``ID_BOUNDS``; anything else reads as ``NO_ID``), times within ``MAX_TIME_NS`` of the
report's clock origin (``valid_interval``); and the ids packed in a ``globalTid``
(``pid_of``, ``tid_of``) and the pattern of an NVTX name (``range_pattern``).
"""

from __future__ import annotations

import math
import re

import numpy as np

from nsysprobe.common.safetext import NAME_CHARS
from nsysprobe.common.safetext import name as _name

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
# Timestamps beyond 73 years from the report's origin are damage, not data; bounding them keeps
# every difference of two timestamps within int64.
MAX_TIME_NS = 1 << 61
# Bytes of a text read to make a name of NAME_CHARS characters (4 bytes a character at most).
_MAX_NAME_BYTES = 4 * (NAME_CHARS + 1)


# Runs of digits, as ``range_pattern`` masks them.
_DIGITS = re.compile(r"\d+")


def range_pattern(name: str) -> str:
    """An NVTX name with its numbers replaced, so ``Batch 12`` and ``Batch 13`` group."""
    return _DIGITS.sub("#", name)


def pid_of(global_id: np.ndarray) -> np.ndarray:
    """The process id packed in a ``globalTid``/``globalPid`` (bits 24-47)."""
    out = np.right_shift(np.asarray(global_id, dtype=np.int64), 24)
    out &= 0xFFFFFF  # in place: one array, not two, over tables of millions of rows
    return out


def tid_of(global_tid: np.ndarray) -> np.ndarray:
    """The thread id packed in a ``globalTid`` (bits 0-23)."""
    return np.asarray(global_tid, dtype=np.int64) & 0xFFFFFF


def as_text(value: object) -> str:
    """Text of a value that should be text, as a name (``safetext.name``): BLOBs and numbers
    are decoded or formatted."""
    if isinstance(value, bytes):
        return text_from_bytes(value)
    return _name(value if isinstance(value, str) else str(value))


def as_int(value: object) -> int | None:
    """An integer column's value, or None for NULL, text, a BLOB or a number that is not an
    int64 (what a damaged or hand-edited export may hold)."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value) or not float(value).is_integer():
            return None
        value = int(value)
    if isinstance(value, (int, np.integer)) and INT64_MIN <= value <= INT64_MAX:
        return int(value)
    return None


def lenient_text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="replace")


def text_from_bytes(raw: bytes) -> str:
    """Every text the main connection reads: decoded leniently, as a name."""
    return _name(lenient_text(raw[:_MAX_NAME_BYTES]))


# Sizes no real copy or memset has, read as unknown (-1): a TiB per copy is beyond any GPU's
# memory, and sums over millions of rows stay far from overflowing.
_MAX_OP_BYTES = 1 << 40
# The ids the analyses group or join rows by, and the values each can have: a process or
# thread id packs pids into a non-negative int64, CUPTI numbers streams and correlations from
# 0 up, and no machine has 2^31 GPUs. Any other value (and NULL, text, a REAL, a column this
# version lacks) reads as ``NO_ID``: the row has no usable id, and is counted, never guessed.
MAX_DEVICE_ID = (1 << 31) - 1
NO_ID = -1
ID_BOUNDS = {
    "deviceId": (0, MAX_DEVICE_ID),
    **{c: (0, INT64_MAX) for c in ("globalPid", "globalTid", "streamId", "correlationId")},
}
BOUNDS = {"bytes": (0, _MAX_OP_BYTES), **ID_BOUNDS}

# Id columns read as int32 when every value fits: half the memory of tables of millions of
# rows. Timestamps, byte counts and global thread/process ids (pid << 24) stay int64.
IDS = frozenset({"deviceId", "streamId", "correlationId", "nameId", "domainId", "rowid"})


def narrow(values: np.ndarray) -> np.ndarray:
    """``values`` as int32 when they all fit, else as they are."""
    if values.dtype == np.int32:
        return values
    if values.size and (values.min() < -(1 << 31) or values.max() >= 1 << 31):
        return values
    return values.astype(np.int32)


def present(value: object) -> bool:
    """Not NULL (nor a float NaN, which SQLite cannot hold but a crafted value may)."""
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def number(value: object) -> int | float | None:
    """A value of a column of numbers as a number: integers and finite floats as they are,
    text that spells a number parsed; None for NULL, a BLOB or anything else."""
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                return None
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)) and math.isfinite(value):
        return float(value)
    return None


def lenient_int(value: object) -> int:
    """An integer column's value read leniently (``number``, floats cut toward zero), -1
    where it is no number or beyond int64."""
    n = number(value)
    if n is None:
        return -1
    n = int(n)
    return n if INT64_MIN <= n <= INT64_MAX else -1


def text_affinity(declared: str) -> bool:
    """Whether SQLite gives a column of this declared type TEXT affinity (a number stored in
    it becomes text)."""
    return "INT" not in declared and any(k in declared for k in ("CHAR", "CLOB", "TEXT"))


def interval_where(extra: str) -> str:
    return f"WHERE {valid_interval('start', 'end')} AND ({extra})"


def valid_interval(start: str, end: str) -> str:
    """SQL true for a row whose start and end are integers within ``MAX_TIME_NS`` of the
    report's clock origin, end not before start."""
    return (
        f"typeof(\"{start}\") = 'integer' AND typeof(\"{end}\") = 'integer' AND "
        f'"{end}" >= "{start}" AND "{start}" >= {-MAX_TIME_NS} AND "{end}" <= {MAX_TIME_NS}'
    )


def int_expr(column: str, low: int | None = None, high: int | None = None) -> str:
    """The column's value where it is an integer (within [low, high] when given), else -1
    (NULL, text, BLOB, real, or out of bounds)."""
    test = f"typeof(\"{column}\") = 'integer'"
    if low is not None:
        test += f' AND "{column}" BETWEEN {low} AND {high}'
    return f'CASE WHEN {test} THEN "{column}" ELSE -1 END'
