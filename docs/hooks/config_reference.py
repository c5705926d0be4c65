"""The configuration reference's tables, generated from the options declared in code.

``configuration.template.md`` (beside this file) holds the prose and one marker per table,
``<!-- options: NAME -->``; each marker becomes the table of that section's options:

* ``sink``, ``serialization``: the sink's own options (``sparkkafka_sink.spark.option_catalog``);
* ``kafka``: every producer key as a ``kafka.*`` option (``sparkkafka_sink.producer.config``,
  the type read off each key's validator, the sink's own defaults where it sets them);
* ``schema.registry``: the Schema Registry client's settings
  (``sparkkafka_sink.serialization.registry_settings``);
* ``kafka-refused``, ``schema.registry-unsupported``: what the sink refuses, and why.

A marker naming no section, or a section without its marker, fails: every option declared in
code lands on the page, ``docs/reference/configuration.md``, which ``generated_pages.py`` writes.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

MARKER = re.compile(r"<!--\s*options:\s*([\w.-]+)\s*-->")


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _name(name: str) -> str:
    """An option's name as code that may break after a dot, and only there (``extra.css``)."""
    return "<code>" + html.escape(name).replace(".", ".<wbr>") + "</code>"


def options_table(entries: list[Any]) -> str:
    """A Markdown table of ``OptionDoc`` entries: name, type, default, meaning."""
    lines = ["| Option | Type | Default | Meaning |", "|---|---|---|---|"]
    for e in entries:
        doc = e.doc[:1].upper() + e.doc[1:]
        lines.append(f"| {_name(e.name)} | {_cell(e.type)} | {_cell(e.default)} | {_cell(doc)} |")
    return "\n".join(lines)


def names_in(markdown: str) -> set[str]:
    """The option names of the tables in ``markdown`` (what a reader sees)."""
    return {html.unescape(m.replace("<wbr>", "")) for m in re.findall(r"^\| <code>(.*?)</code> \|", markdown, re.M)}


def _refusals(reasons: dict[str, str], prefix: str) -> str:
    return "\n".join(f"- `{prefix}{key}`: {_cell(why)}." for key, why in reasons.items())


def sections() -> dict[str, Callable[[], str]]:
    """Each section's Markdown, built when asked (the imports need the package installed)."""
    from sparkkafka_sink.serialization.registry_settings import UNSUPPORTED_KEYS
    from sparkkafka_sink.spark import option_catalog as catalog

    return {
        "sink": lambda: options_table([o.doc_entry() for o in catalog.SINK_OPTIONS]),
        "serialization": lambda: options_table([o.doc_entry() for o in catalog.SERIALIZATION_OPTIONS]),
        "kafka": lambda: options_table(catalog.producer_options()),
        "schema.registry": lambda: options_table(catalog.registry_options()),
        "kafka-refused": lambda: _refusals(catalog.REJECTED_KAFKA_KEYS, "kafka."),
        "schema.registry-unsupported": lambda: _refusals(UNSUPPORTED_KEYS, "schema.registry."),
    }


def expand(markdown: str) -> str:
    """``markdown`` with every marker replaced by its section's table."""
    known = sections()
    found = MARKER.findall(markdown)
    unknown = sorted(set(found) - set(known))
    missing = sorted(set(known) - set(found))
    if unknown or missing:
        raise ValueError(f"configuration.template.md: markers naming no section: {unknown or 'none'}; sections without a marker: "
                         f"{missing or 'none'} (known sections: {', '.join(known)})")
    return MARKER.sub(lambda m: known[m.group(1)](), markdown)
