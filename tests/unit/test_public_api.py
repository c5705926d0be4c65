"""The packages' public names: each in ``__all__``, loaded on first use, and seen by type checkers
(the ``if TYPE_CHECKING:`` imports) exactly as ``__getattr__`` loads them; importing a package
stays light; the package says it is typed (``py.typed``)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import sparkkafka_sink

PACKAGES = ["sparkkafka_sink", "sparkkafka_sink.producer", "sparkkafka_sink.testing"]


def _type_checking_imports(package: str) -> dict[str, str]:
    """``{name: module}`` imported under ``if TYPE_CHECKING:`` in the package's ``__init__``."""
    tree = ast.parse(Path(importlib.import_module(package).__file__ or "").read_text())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module, ast.dump(imp)
                found.update({alias.asname or alias.name: imp.module for alias in imp.names})
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_lazy_names_are_public_resolve_and_are_what_type_checkers_see(package):
    module = importlib.import_module(package)
    lazy = module._LAZY
    assert set(lazy) <= set(module.__all__)
    assert _type_checking_imports(package) == lazy
    for name in module.__all__:
        assert getattr(module, name) is not None, name
    for name, source in lazy.items():
        assert getattr(module, name) is getattr(importlib.import_module(source), name), name
    assert set(module.__all__) <= set(dir(module))


@pytest.mark.parametrize("package", PACKAGES)
def test_unknown_names_raise_attribute_error(package):
    with pytest.raises(AttributeError, match="no_such_name"):
        importlib.import_module(package).no_such_name  # noqa: B018 (the lookup is the test)


def test_importing_the_packages_loads_neither_spark_nor_the_producer():
    code = textwrap.dedent(f"""
        import sys
        import {", ".join(PACKAGES)}
        print(" ".join(sorted(sys.modules)))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    heavy = [m for m in out.stdout.split() if m.split(".")[0] in ("numpy", "pyarrow", "pyspark", "confluent_kafka")
             or m.startswith(("sparkkafka_sink.producer.", "sparkkafka_sink.spark", "sparkkafka_sink.network",
                              "sparkkafka_sink.testing."))]
    assert heavy == [], heavy


def test_the_package_is_marked_typed():
    assert Path(sparkkafka_sink.__file__).with_name("py.typed").is_file()
