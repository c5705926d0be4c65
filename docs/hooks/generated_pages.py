"""The docs pages made from code and from other files, committed as Markdown so they read on GitHub
too (as librdkafka commits its CONFIGURATION.md), and checked against what they are made from.

* ``docs/reference/configuration.md``: ``configuration.template.md`` (beside this file) with each
  ``<!-- options: NAME -->`` marker replaced by its table (``config_reference.py``);
* ``docs/reference/java-keys.md``: every key of the Java producer and what it does here
  (``sparkkafka_sink.producer.java_keys``);
* ``docs/benchmarks.md``: ``benchmarks/README.md``, the method and the current results.

``python docs/hooks/generated_pages.py`` writes them; ``--check`` lists the stale ones and exits 1.
As an MkDocs hook it fails the build when one is stale; ``tests/unit/test_docs_reference.py``
fails too.

The contributing pages are the repository's own ``ARCHITECTURE.md``, ``DEVELOPERS.md`` and
``CHANGELOG.md``, put on the site as they are at build time (``on_files``): no copy or include
of them under ``docs/``, which would read wrong on GitHub or fall behind.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
COMMAND = "python docs/hooks/generated_pages.py"


def _sibling(name: str) -> Any:
    """A module beside this file (MkDocs loads hooks by path, not as a package)."""
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _notice(source: str) -> str:
    return f"<!-- generated from {source} by `{COMMAND}`: edit that, not this page -->\n\n"


def _configuration() -> str:
    template = (HERE / "configuration.template.md").read_text(encoding="utf-8")
    title, _, body = template.partition("\n")
    return title + "\n\n" + _notice("docs/hooks/configuration.template.md and the options declared in code") \
        + _sibling("config_reference").expand(body.lstrip("\n"))


def _java_keys() -> str:
    from sparkkafka_sink.producer import config
    from sparkkafka_sink.producer import java_keys as jk

    table = config.migration_table()
    counts = {s: sum(row[2] == s for row in table) for s in (jk.HONOURED, jk.NOTED, jk.REFUSED)}
    cell = lambda text: " ".join(str(text).split()).replace("|", "\\|")  # noqa: E731
    return "\n".join([
        "# The Java producer's keys",
        "",
        _notice("sparkkafka_sink/producer/java_keys.py").rstrip("\n"),
        "",
        f"Every configuration key of the Java producer (kafka-clients 3.9 and 4.x, {len(table)} keys) and what it "
        "does here, so the `kafka.*` options of a `format(\"kafka\")` job carry over to `format(\"pyprod-kafka\")`. "
        f"**honoured** ({counts[jk.HONOURED]}): applied here (the last column says how). "
        f"**noted** ({counts[jk.NOTED]}): accepted, with one line in the driver's log saying it has no effect "
        f"here and why. **refused** ({counts[jk.REFUSED]}): the write fails on the driver with the reason and "
        "the way to get the same here (some are accepted with the values that ask for what happens here anyway).",
        "",
        "| Key | kafka-clients | Status | Here |",
        "| --- | --- | --- | --- |",
        *(f"| `{key}` | {lines} | {status} | {cell(here)} |" for key, lines, status, here in table),
        "",
        "The keys of the Java consumer and admin client that the producer lacks are noted too (a properties "
        "file shared by a job's clients gives them to the producer; Java's producer warns that each \"isn't a "
        "known config\"): " + ", ".join(f"`{k}`" for k in config.other_clients_noted()) + ".",
        "",
    ])


def _benchmarks() -> str:
    readme = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    title, _, body = readme.partition("\n")
    return title + "\n\n" + _notice("benchmarks/README.md") + body.lstrip("\n")


#: each generated page (relative to the repository) and what makes it
PAGES: dict[str, Callable[[], str]] = {
    "docs/reference/configuration.md": _configuration,
    "docs/reference/java-keys.md": _java_keys,
    "docs/benchmarks.md": _benchmarks,
}


#: the site's pages that are files of the repository as they are: {page under docs/: file}
INCLUDED: dict[str, str] = {
    "contributing/architecture.md": "ARCHITECTURE.md",
    "contributing/developers.md": "DEVELOPERS.md",
    "contributing/changelog.md": "CHANGELOG.md",
}


def stale() -> list[str]:
    """The generated pages whose committed text differs from what their sources make now."""
    return [page for page, make in PAGES.items()
            if not (ROOT / page).is_file() or (ROOT / page).read_text(encoding="utf-8") != make()]


def write() -> list[str]:
    """Write every stale page; the ones written."""
    written = stale()
    for page in written:
        (ROOT / page).write_text(PAGES[page](), encoding="utf-8")
    return written


def on_pre_build(config: Any) -> None:
    """MkDocs hook: a stale page fails the build (the site would show what the code no longer does)."""
    from mkdocs.exceptions import PluginError

    out_of_date = stale()
    if out_of_date:
        raise PluginError(f"generated pages are stale: {', '.join(out_of_date)}; run `{COMMAND}` and commit them")


def on_files(files: Any, config: Any) -> Any:
    """MkDocs hook: the repository's files in ``INCLUDED`` become pages of the site."""
    from mkdocs.structure.files import File

    for page, source in INCLUDED.items():
        files.append(File.generated(config, page, abs_src_path=str(ROOT / source)))
    return files


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        out_of_date = stale()
        for page in out_of_date:
            print(f"stale: {page}")
        return 1 if out_of_date else 0
    if argv:
        print(f"usage: {COMMAND} [--check]", file=sys.stderr)
        return 2
    for page in write():
        print(f"wrote {page}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
