"""The configuration reference of the docs site is generated from the options declared in code
(``spark/option_catalog.py``, ``producer/config.py``, ``serialization/registry_settings.py``):
every option must be documented there, the parser must know exactly those options and apply
their declared defaults, and the generated page must name every one of them."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest

from sparkkafka_sink.producer.config import BULK_BATCH_SIZE
from sparkkafka_sink.spark import option_catalog as catalog
from sparkkafka_sink.spark.formats import FORMATS_OPTIONS, ColumnFormat, Formats
from sparkkafka_sink.spark.options import SinkOptions, _check_known, parse_options

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _hook(name: str = "config_reference"):
    spec = importlib.util.spec_from_file_location(name, DOCS / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def every_option():
    return ([o.doc_entry() for o in catalog.SINK_OPTIONS + catalog.SERIALIZATION_OPTIONS]
            + catalog.producer_options() + catalog.registry_options())


@pytest.mark.parametrize("entry", every_option(), ids=lambda e: e.name)
def test_every_option_has_a_meaning_a_type_and_a_default(entry):
    assert entry.doc.strip(), f"{entry.name}: no documentation text"
    assert entry.type.strip(), f"{entry.name}: no type"
    assert entry.default.strip(), f"{entry.name}: no default (or what leaving it unset means)"


def test_option_names_are_unique():
    names = [e.name.lower() for e in every_option()]
    assert len(names) == len(set(names))


def test_the_parser_knows_the_declared_options():
    for declared in catalog.OPTIONS.values():
        _check_known({declared.key: "x"})  # not reported as a typo


def test_each_declared_field_is_a_field_of_the_plan_it_fills():
    groups = [(catalog.SINK_OPTIONS, SinkOptions), (FORMATS_OPTIONS, Formats),
              (catalog.column_options("key"), ColumnFormat), (catalog.column_options("value"), ColumnFormat)]
    assert sorted(o.key for group, _ in groups for o in group) == sorted(catalog.OPTIONS)  # every option in one
    for group, plan in groups:
        names = {f.name for f in dataclasses.fields(plan)}
        assert {o.field for o in group if o.field} <= names, plan


def test_a_sink_plan_field_defaults_to_its_option_s_declared_default():
    """``SinkOptions`` built by hand (as tests and the driver's helpers do) holds what a parsed
    write holds for every option left out: each default is stated once, in the declaration
    (``coalesce_bytes`` defaulted to 0 here against the option's 16 MiB)."""
    defaults = {f.name: f.default for f in dataclasses.fields(SinkOptions)}
    for option in catalog.SINK_OPTIONS:
        if option.field and option.field in defaults and defaults[option.field] is not dataclasses.MISSING:
            assert defaults[option.field] == option.parse(None), option.name


def test_the_parser_applies_the_declared_defaults():
    parsed = parse_options({"kafka.bootstrap.servers": "h:9092", "topic": "t"})
    declared = {o.name: o.default for o in catalog.SINK_OPTIONS}
    assert parsed.coalesce_bytes == declared["coalesceBytes"]
    assert parsed.cluster_check_timeout_ms == declared["clusterCheckTimeoutMs"]
    assert parsed.producer_cache_timeout_ms == declared["producerCacheTimeoutMs"]
    assert parsed.tune_allocator is declared["tuneAllocator"]
    assert parsed.exactly_once is (declared["deliveryGuarantee"] == "exactly-once")
    assert parsed.tolerate_bad_rows is (declared["errors.tolerance"] == "all")
    assert parsed.dead_letter_context_headers is declared["errors.deadletterqueue.context.headers.enable"]
    assert parsed.log_bad_rows is declared["errors.log.enable"]
    assert parsed.max_records_per_s is None and parsed.max_bytes_per_s is None
    assert parsed.producer_config.bulk_batch_size == BULK_BATCH_SIZE  # the bulk path's, the sink's batches
    assert parsed.producer_config["linger.ms"] == catalog.SINK_LINGER_MS
    assert parsed.formats.value.format == catalog.option("valueFormat").default
    assert parsed.formats.value.subject_strategy == catalog.option("value.subject.name.strategy").default


def test_the_generated_reference_names_every_option():
    hook = _hook()
    page = (DOCS / "reference" / "configuration.md").read_text(encoding="utf-8")
    assert not hook.MARKER.search(page)
    rows = hook.names_in(page)
    missing = [e.name for e in every_option() if e.name not in rows]
    assert not missing, f"not in the reference: {missing}"
    for refused in catalog.REJECTED_KAFKA_KEYS:
        assert f"`kafka.{refused}`" in page


def test_a_marker_without_a_section_or_a_section_without_a_marker_fails_the_build():
    hook = _hook()
    markers = "\n".join(f"<!-- options: {name} -->" for name in hook.sections())
    hook.expand(markers)
    with pytest.raises(ValueError, match="markers naming no section: \\['nope'\\]"):
        hook.expand(markers + "\n<!-- options: nope -->")
    with pytest.raises(ValueError, match="sections without a marker: \\['sink'\\]"):
        hook.expand(markers.replace("<!-- options: sink -->", ""))


def test_the_generated_pages_are_committed_as_their_sources_make_them():
    """The configuration reference, the Java keys' table and the benchmarks page read on GitHub as
    on the site: committed as generated, never behind the code."""
    pages = _hook("generated_pages")
    assert not pages.stale(), (f"stale: {pages.stale()}; run `{pages.COMMAND}` and commit the pages")


def test_a_stale_page_is_found(tmp_path, monkeypatch):
    pages = _hook("generated_pages")
    made = {page: make() for page, make in pages.PAGES.items()}
    monkeypatch.setattr(pages, "PAGES", {page: (lambda p=page: made[p])
                                         for page in made})
    monkeypatch.setattr(pages, "ROOT", tmp_path)
    for page, text in made.items():
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / page).write_text(text, encoding="utf-8")
    assert pages.stale() == []
    (tmp_path / "docs/benchmarks.md").write_text("# Benchmarks\n\nold figures\n", encoding="utf-8")
    assert pages.stale() == ["docs/benchmarks.md"]
