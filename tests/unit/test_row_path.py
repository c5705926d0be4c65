"""A row's path through ``spark/task`` runs one way: read from the call graph of its modules,
each stage a row reaches is called from one stage only (besides ``write_task``, the task's
entry, which builds the stages and drives them), and no call leads back to a module the row
came through.

The graph is built from the source (``ast``): a call resolves through the names a module
imports, and a method call through the annotated type of its receiver (a parameter, a local
made by a constructor, an attribute ``__init__`` set).  ``task_info`` is a value every stage
reads, not a stage: calls into it are left out (a ``routing.Part`` the later stages are handed
is read by its fields: they call nothing of ``routing``).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import sparkkafka_sink

TASK = Path(sparkkafka_sink.__file__).parent / "spark" / "task"
PACKAGE = "sparkkafka_sink.spark.task."
#: values, not stages
VALUES = {"task_info"}
#: the task's entry: it builds every stage and drives them
ENTRY = "write_task"

Function = tuple[str, str]  # (module, "name" or "Class.name")


def _names_in(annotation: ast.expr | None) -> list[str]:
    return [n.id for n in ast.walk(annotation) if isinstance(n, ast.Name)] if annotation is not None else []


class _Module:
    """One module's definitions and what its names refer to."""

    def __init__(self, name: str, tree: ast.Module):
        self.name = name
        self.tree = tree
        #: a name usable here -> (module, name) of a class or function of spark/task
        self.names: dict[str, tuple[str, str]] = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
                for alias in node.names:
                    self.names[alias.asname or alias.name] = (node.module[len(PACKAGE):], alias.name)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                self.names[node.name] = (name, node.name)


def _modules() -> dict[str, _Module]:
    return {p.stem: _Module(p.stem, ast.parse(p.read_text())) for p in sorted(TASK.glob("*.py"))
            if p.stem != "__init__"}


def _call_graph(modules: dict[str, _Module]) -> dict[Function, set[Function]]:
    classes = {(m.name, n.name): n for m in modules.values() for n in m.tree.body if isinstance(n, ast.ClassDef)}

    def kind(module: _Module, names: list[str]) -> tuple[str, str] | None:
        """The class of spark/task an annotation (or constructor) names, if any."""
        for n in names:
            target = module.names.get(n)
            if target is not None and target in classes:
                return target
        return None

    def attributes(module: _Module, cls: ast.ClassDef) -> dict[str, tuple[str, str]]:
        """``self.x`` -> its class, from ``__init__`` (``self.x = param`` or ``self.x = Class(...)``)."""
        found = {}
        for f in cls.body:
            if isinstance(f, ast.AnnAssign) and isinstance(f.target, ast.Name):
                if (k := kind(module, _names_in(f.annotation))) is not None:
                    found[f.target.id] = k
            if not (isinstance(f, ast.FunctionDef) and f.name == "__init__"):
                continue
            params = {a.arg: kind(module, _names_in(a.annotation)) for a in f.args.args + f.args.kwonlyargs}
            for node in ast.walk(f):
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target = node.targets[0]
                    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                            and target.value.id == "self":
                        value = node.value
                        k = (params.get(value.id) if isinstance(value, ast.Name) else
                             kind(module, [value.func.id]) if isinstance(value, ast.Call)
                             and isinstance(value.func, ast.Name) else None)
                        if k is not None:
                            found[target.attr] = k
        return found

    graph: dict[Function, set[Function]] = defaultdict(set)
    for module in modules.values():
        for owner, cls in [(None, None), *((n.name, n) for n in module.tree.body if isinstance(n, ast.ClassDef))]:
            body = module.tree.body if cls is None else cls.body
            own_attributes = attributes(module, cls) if cls is not None else {}
            for f in (n for n in body if isinstance(n, ast.FunctionDef)):
                me = (module.name, f.name if owner is None else f"{owner}.{f.name}")
                typed = {a.arg: kind(module, _names_in(a.annotation)) for a in f.args.args + f.args.kwonlyargs}
                for node in ast.walk(f):  # locals made by a constructor
                    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                            and isinstance(node.value.func, ast.Name):
                        for target in node.targets:
                            if isinstance(target, ast.Name) and (k := kind(module, [node.value.func.id])):
                                typed[target.id] = k
                for node in ast.walk(f):
                    if not isinstance(node, ast.Call):
                        continue
                    func = node.func
                    if isinstance(func, ast.Name) and func.id in module.names:
                        target = module.names[func.id]
                        graph[me].add((target[0], f"{target[1]}.__init__") if target in classes else target)
                    elif isinstance(func, ast.Attribute):
                        receiver = func.value
                        k = None
                        if isinstance(receiver, ast.Name):
                            k = (module.name, owner) if receiver.id == "self" and owner else typed.get(receiver.id)
                        elif isinstance(receiver, ast.Attribute) and isinstance(receiver.value, ast.Name) \
                                and receiver.value.id == "self":
                            k = own_attributes.get(receiver.attr)
                        if k is not None:
                            graph[me].add((k[0], f"{k[1]}.{func.attr}"))
    return graph


def _module_edges(graph: dict[Function, set[Function]], start: Function) -> dict[str, set[str]]:
    """Module -> the modules it calls into, over every function reachable from ``start``."""
    edges: dict[str, set[str]] = defaultdict(set)
    seen, todo = {start}, [start]
    while todo:
        caller = todo.pop()
        for callee in graph.get(caller, ()):
            if callee[0] != caller[0] and callee[0] not in VALUES:
                edges[caller[0]].add(callee[0])
            if callee not in seen:
                seen.add(callee)
                todo.append(callee)
    return edges


def _callers(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    callers: dict[str, set[str]] = defaultdict(set)
    for caller, callees in edges.items():
        for callee in callees:
            callers[callee].add(caller)
    return callers


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path, node, nxt]
            if nxt not in state and (found := visit(nxt, [*path, node])):
                return found
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node, [])):
            return found
    return None


def test_a_rows_path_through_the_task_runs_one_way():
    edges = _module_edges(_call_graph(_modules()), (ENTRY, "run_write_task"))
    # what the graph reads (so the test cannot pass by seeing nothing)
    assert {"routing", "delivery", "dead_letters", "task_producer", "batches"} <= edges[ENTRY]
    assert "encoders" in edges["routing"] and "dead_letters" in edges["delivery"]
    assert "delivery" not in edges["routing"], "routing returns what became of the rows; the tracker records it"
    entered_twice = {m: sorted(c - {ENTRY}) for m, c in _callers(edges).items() if len(c - {ENTRY}) > 1}
    assert not entered_twice, f"modules a row enters from more than one stage: {entered_twice}"
    assert _cycle(edges) is None, f"a call leads back: {' -> '.join(_cycle(edges) or [])}"
