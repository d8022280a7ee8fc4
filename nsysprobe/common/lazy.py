"""Package attributes imported on first use, so that ``import nsysprobe.cli`` or
``import nsysprobe.numa.topology`` does not import every module a package re-exports."""

from __future__ import annotations

import importlib
import sys
import types


def lazy_exports(package: str, where: dict[str, str]) -> None:
    """Make the exports of ``package`` (an ``__init__`` calls this with its ``__name__``)
    load on first use: ``where`` maps each exported name to the submodule defining it."""

    class LazyPackage(types.ModuleType):
        def __getattr__(self, name: str):
            if name not in where:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            value = getattr(importlib.import_module(f"{package}.{where[name]}"), name)
            setattr(self, name, value)
            return value

        def __dir__(self) -> list[str]:
            return sorted(set(self.__dict__) | set(where))

        def __setattr__(self, name: str, value) -> None:
            # Importing the submodule ``plan`` binds it on the package; the function ``plan``
            # it defines and the package exports wins, as ``from .plan import plan`` would.
            if isinstance(value, types.ModuleType) and where.get(name) == name:
                value = getattr(value, name)
            super().__setattr__(name, value)

    sys.modules[package].__class__ = LazyPackage
