"""The report's tables as pandas DataFrames or Arrow tables, on request:
``report.steps.to_pandas()``, ``report.steps.to_arrow()``.

pandas is optional (the ``pandas`` extra): it is imported inside ``to_pandas`` only, so the
command line and ``analyze`` never load it.

A table is a tuple of frozen dataclasses (the step rows, the account's buckets, ...). Its
frame has one row per item and one column per field, in field order, with the field's name
and unit (``*_ns`` integer nanoseconds, ``*_ratio`` in [0, 1]), as in the JSON:

- ``int`` fields are ``int64``, ``int | None`` ones pandas' nullable ``Int64`` (exact, with
  ``<NA>``), ``float`` ones ``float64``, ``bool`` ones ``bool``, text ``object``;
- the one field of (name, number) pairs a table may widen, tuples or two-field dataclasses
  that list every name above zero (a step's ``children``, an account step's ``buckets``),
  becomes one column per name, ``FIELD.NAME``, in the order the names first appear, 0 where
  a row has none;
- any other nested value (a dict of evidence, a bucket's largest ``details``, a tuple of
  larger dataclasses, a dataclass) is left out: it is a table of its own
  (``report.gaps.to_pandas("longest")``) or a detail on the objects.

A class with tables names them in ``TABLES``, the first the default: table -> row class, or
(row class, the pairs field widened).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from nsysprobe.errors import InputError, MissingDependency

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

PANDAS_FIX = "pip install 'nsysprobe[pandas]' (or pandas itself) in this environment"
_SCALARS = {int: "int64", float: "float64", bool: "bool", str: "object"}
_OPTIONAL = {int: "Int64", float: "float64", bool: "boolean", str: "object"}


def _pandas():
    try:
        import pandas
    except ImportError as exc:
        raise MissingDependency(
            f"to_pandas: pandas is not installed ({exc}); {PANDAS_FIX}"
        ) from None
    return pandas


@functools.cache
def _columns(row_type: type, wide: str | None) -> tuple[tuple[str, str, str | None], ...]:
    """(field, "column" or "pairs", dtype) for each field of ``row_type`` a frame keeps."""
    hints = typing.get_type_hints(row_type)
    out = []
    for field in dataclasses.fields(row_type):
        hint = hints[field.name]
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if hint in _SCALARS:
            out.append((field.name, "column", _SCALARS[hint]))
        elif _is_union(hint) and len(args) == 1 and args[0] in _OPTIONAL:
            out.append((field.name, "column", _OPTIONAL[args[0]]))
        elif field.name == wide:
            if not (typing.get_origin(hint) is tuple and _is_pair(args[0] if args else None)):
                raise TypeError(f"{row_type.__name__}.{wide}: not a tuple of (name, number)")
            out.append((field.name, "pairs", None))
    return tuple(out)


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def _is_pair(item: Any) -> bool:
    """A (str, number) tuple type, or a dataclass of two fields typed so."""
    if typing.get_origin(item) is tuple:
        kinds = typing.get_args(item)
    elif dataclasses.is_dataclass(item):
        hints = typing.get_type_hints(item)
        kinds = tuple(hints[f.name] for f in dataclasses.fields(item))
    else:
        return False
    return len(kinds) == 2 and kinds[0] is str and kinds[1] in (int, float)


def _pairs(value: Any) -> list[tuple[str, Any]]:
    return [tuple(p) if isinstance(p, tuple) else dataclasses.astuple(p) for p in value]


def _data(rows: Sequence[Any], row_type: type, wide: str | None) -> dict[str, tuple[list, str]]:
    """column -> (its values, its pandas dtype), as the module docstring lays them out."""
    data: dict[str, tuple[list, str]] = {}
    for name, how, dtype in _columns(row_type, wide):
        if how == "column":
            data[name] = ([getattr(r, name) for r in rows], dtype)
            continue
        per_row = [dict(_pairs(getattr(r, name))) for r in rows]
        keys = list(dict.fromkeys(k for d in per_row for k in d))
        for key in keys:
            values = [d.get(key, 0) for d in per_row]
            kind = "float64" if any(isinstance(v, float) for v in values) else "int64"
            data[f"{name}.{key}"] = (values, kind)
    return data


def to_frame(rows: Sequence[Any], row_type: type, wide: str | None = None) -> pd.DataFrame:
    """``rows`` (instances of the dataclass ``row_type``) as a DataFrame, the pairs field
    ``wide`` one column per name (module docstring)."""
    pd = _pandas()
    data = {
        name: pd.Series(values, dtype=dtype)
        for name, (values, dtype) in _data(rows, row_type, wide).items()
    }
    return pd.DataFrame(data, index=pd.RangeIndex(len(rows)))


# pandas dtype -> Arrow type: the nullable ones (``Int64``, ``boolean``) hold nulls in Arrow.
_ARROW_TYPES = {
    "int64": "int64",
    "Int64": "int64",
    "float64": "float64",
    "bool": "bool_",
    "boolean": "bool_",
    "object": "string",
}


def to_arrow_table(rows: Sequence[Any], row_type: type, wide: str | None = None) -> pa.Table:
    """``rows`` as a pyarrow Table with the columns of ``to_frame`` (None as null)."""
    import pyarrow as pa

    data = _data(rows, row_type, wide)
    arrays = [pa.array(v, getattr(pa, _ARROW_TYPES[d])()) for v, d in data.values()]
    return pa.Table.from_arrays(arrays, names=list(data))


class Tables:
    """Gives a result ``to_pandas(table)``; the class lists its tables in ``TABLES``."""

    TABLES: ClassVar[dict[str, type | tuple[type, str]]] = {}

    def to_pandas(self, table: str | None = None) -> pd.DataFrame:
        """The table ``table`` (default: the first of ``TABLES``) as a DataFrame, one row per
        item, one column per field (``nsysprobe.common.frames``). Needs pandas."""
        return to_frame(*self._table("to_pandas", table))

    def to_arrow(self, table: str | None = None) -> pa.Table:
        """The table ``table`` as a pyarrow Table, the columns of ``to_pandas`` (nullable ones
        with nulls): ``polars.from_arrow(report.steps.to_arrow())`` without pandas."""
        return to_arrow_table(*self._table("to_arrow", table))

    def _table(self, method: str, table: str | None) -> tuple[Sequence[Any], type, str | None]:
        names = list(self.TABLES)
        name = names[0] if table is None else table
        if name not in self.TABLES:
            raise InputError(
                f"{method}({table!r}): {type(self).__name__} has no such table; "
                f"one of {', '.join(repr(n) for n in names)}"
            )
        spec = self.TABLES[name]
        row_type, wide = spec if isinstance(spec, tuple) else (spec, None)
        return getattr(self, name), row_type, wide
