"""A package's public names loaded on first use (PEP 562).

Importing ``sparkkafka_sink`` (on the Spark driver, in a Python worker, by a tool listing data
sources) must not start Spark or pull in numpy, pyarrow and the producer; a name's module is
imported when the name is first used.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, sources: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose lazy names ``sources`` maps to
    the module that defines each."""

    def __getattr__(name: str) -> Any:
        source = sources.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(source), name)

    def __dir__() -> list[str]:
        module = sys.modules[package]
        return sorted(set(vars(module)) | set(getattr(module, "__all__", ())))

    return __getattr__, __dir__
