"""Each layer imports only the layers below it (ARCHITECTURE.md), lazy imports included, and
nothing below the package's ``__init__`` imports it."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import sparkkafka_sink

ROOT = Path(sparkkafka_sink.__file__).parent
#: the layers, bottom first; a module may import its own layer and those below
LAYERS = {
    "errors": 0, "config_def": 0, "varint": 0, "redaction": 0, "version": 0, "security_protocol": 0, "sasl_keys": 0, "tls_keys": 0, "bootstrap": 0, "lazy_exports": 0, "oauth": 0, "cloud": 0,
    "varint_columns": 0, "arrow_views": 0,
    "protocol": 1, "record": 1,
    "network": 2,
    "producer": 3,
    "serialization": 4, "exactly_once": 4, "otel": 4,
    "spark": 5,
}
#: beside the layers: they use the product, the product never uses them
BESIDE = {"testing", "demo", "examples", "transactions", "__init__"}


def _layer_of(module: str) -> str:
    """``sparkkafka_sink.producer.sender`` -> ``producer``; the package itself -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _is_module(name: str) -> bool:
    path = ROOT.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _imports(path: Path) -> list[tuple[int, str]]:
    package = ".".join(("sparkkafka_sink", *path.relative_to(ROOT).with_suffix("").parts[:-1]))
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            # ``from sparkkafka_sink import errors`` imports a module; ``import Producer`` a name
            found += [(node.lineno, f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base)
                      for a in node.names]
    return [(line, m) for line, m in found if m == "sparkkafka_sink" or m.startswith("sparkkafka_sink.")]


def test_every_layer_imports_only_the_layers_below_it():
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        own = _layer_of(".".join(("sparkkafka_sink", *path.relative_to(ROOT).with_suffix("").parts)))
        if own in BESIDE:
            continue
        for line, module in _imports(path):
            target = _layer_of(module)
            if target == "__init__" or target in BESIDE or LAYERS[target] > LAYERS[own]:
                offenders.append(f"{path.relative_to(ROOT)}:{line} ({own}) imports {module} ({target})")
    assert not offenders, "\n".join(offenders)


def test_the_layer_map_covers_every_module():
    tops = {p.stem if p.is_file() else p.name for p in ROOT.iterdir()
            if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))}
    assert tops == set(LAYERS) | BESIDE


#: spark/ inside, bottom first: what driver and task share (the plan, options, errors...), then
#: driver/ and task/ (neither imports the other), then Spark's entry points
SPARK_ENTRY_POINTS = {"__init__", "datasource", "writer", "stream_writer", "registration"}


def _spark_floor(module: str) -> tuple[int, str]:
    parts = module.split(".")[2:] or ["__init__"]
    if parts[0] in ("driver", "task"):
        return 1, parts[0]
    return (2, "entry") if parts[0] in SPARK_ENTRY_POINTS else (0, "shared")


def test_inside_spark_imports_run_down_only():
    offenders = []
    for path in sorted((ROOT / "spark").rglob("*.py")):
        own = _spark_floor(".".join(("sparkkafka_sink", *path.relative_to(ROOT).with_suffix("").parts)))
        for line, module in _imports(path):
            if not module.startswith("sparkkafka_sink.spark"):
                continue
            target = _spark_floor(module)
            if target[0] > own[0] or (target[0] == own[0] == 1 and target[1] != own[1]):
                offenders.append(f"spark/{path.relative_to(ROOT / 'spark')}:{line} ({own[1]}) imports {module} "
                                 f"({target[1]})")
    assert not offenders, "\n".join(offenders)


def _module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(("sparkkafka_sink", *(parts[:-1] if parts[-1] == "__init__" else parts)))


def test_no_module_imports_itself_round_a_circle():
    """Imports under ``TYPE_CHECKING`` and inside functions count too: a circle is two modules
    that each need the other, whenever the import runs (the error names the circle found)."""
    graph = {module: {m for _, m in _imports(path) if m != module}
             for path in sorted(ROOT.rglob("*.py")) if _layer_of(module := _module_of(path)) not in BESIDE}
    graphlib.TopologicalSorter(graph).prepare()
