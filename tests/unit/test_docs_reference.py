"""The configuration reference of the docs site is generated from the options declared in code
(``spark/option_catalog.py``, ``producer/config.py``, ``serialization/registry_settings.py``):
every option must be documented there, the parser must know exactly those options and apply
their declared defaults, and the generated page must name every one of them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from sparkkafka_sink.config_def import Declared, attribute_for
from sparkkafka_sink.producer.config import BULK_BATCH_SIZE
from sparkkafka_sink.spark import option_catalog as catalog
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


def test_each_option_is_a_typed_attribute_of_the_plan_named_after_it():
    """Every option is declared once, as an attribute of the settings class that holds it (the
    sink's, a column's, the serializer's); the plan reads it by that name (``deliveryGuarantee``
    -> ``delivery_guarantee``, ``valueRecordName`` -> ``formats.value.record_name``)."""
    classes = (catalog.SinkSettings, catalog.ColumnSettings, catalog.SerializerSettings)
    declared = {cls: [d for d in vars(cls).values() if isinstance(d, Declared)] for cls in classes}
    names = [d.key.for_column(c).key for d in declared[catalog.ColumnSettings] for c in catalog.COLUMNS]
    names += [d.key.key for cls in (catalog.SinkSettings, catalog.SerializerSettings) for d in declared[cls]]
    assert sorted(names) == sorted(catalog.OPTIONS)  # every option in one, once
    given = {"kafka.bootstrap.servers": "h:9092", "topic": "t", "coalesceBytes": "1024", "maxRecordsPerSecond": "50",
             "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "t.dlq", "keyFormat": "avro",
             "keyRecordName": "K", "value.subject.name.strategy": "RecordNameStrategy", "valueFormat": "json",
             "valueRecordName": "V", "use.latest.version": "true", "auto.register.schemas": "false",
             "schema.registry.url": "http://registry:8081"}
    parsed = parse_options(given)
    assert (parsed.topic, parsed.coalesce_bytes, parsed.max_records_per_second) == ("t", 1024, 50.0)
    assert (parsed.errors_tolerance, parsed.errors_deadletterqueue_topic_name) == ("all", "t.dlq")
    assert parsed.tolerate_bad_rows
    assert (parsed.formats.key.format, parsed.formats.key.record_name, parsed.formats.key.subject_name_strategy) \
        == ("avro", "K", catalog.option("key.subject.name.strategy").default)
    assert (parsed.formats.value.format, parsed.formats.value.record_name) == ("json", "V")
    assert parsed.formats.value.subject_name_strategy == "RecordNameStrategy"
    assert (parsed.formats.use_latest_version, parsed.formats.registers_schemas) == (True, False)
    for d in declared[catalog.SinkSettings]:
        assert d.attribute == attribute_for(d.key.name)
        assert getattr(parsed, d.attribute) == parsed._values[d.key.name]


def test_an_attribute_not_named_after_its_setting_is_refused_where_it_is_declared():
    with pytest.raises((TypeError, RuntimeError)) as raised:  # (Python 3.11 wraps it in a RuntimeError)
        type("Misnamed", (catalog.SinkSettings,), {"coalesce": Declared(catalog.option("coalesceBytes"))})
    assert "coalesce_bytes for 'coalesceBytes'" in str(raised.value.__cause__ or raised.value)


def test_a_plan_built_without_options_holds_every_declared_default():
    """``SinkOptions`` built by hand (as the driver's helpers and tests do) holds what a parsed
    write holds for every option left out: each default is stated once, in the declaration
    (``coalesce_bytes`` defaulted to 0 in the plan against the option's 16 MiB)."""
    bare = SinkOptions({}, {"bootstrap.servers": "h:9092"})
    for option in catalog.SINK_OPTIONS:
        assert bare._values[option.name] == option.parse(None), option.name
    assert bare.coalesce_bytes == 16 << 20
    assert bare.formats.value.format == bare.formats.key.format == catalog.option("valueFormat").default


def test_the_parser_applies_the_declared_defaults():
    parsed = parse_options({"kafka.bootstrap.servers": "h:9092", "topic": "t"})
    declared = {o.name: o.default for o in catalog.SINK_OPTIONS}
    assert parsed.coalesce_bytes == declared["coalesceBytes"]
    assert parsed.cluster_check_timeout_ms == declared["clusterCheckTimeoutMs"]
    assert parsed.producer_cache_timeout_ms == declared["producerCacheTimeoutMs"]
    assert parsed.tune_allocator is declared["tuneAllocator"]
    assert parsed.exactly_once is (declared["deliveryGuarantee"] == "exactly-once")
    assert parsed.tolerate_bad_rows is (declared["errors.tolerance"] == "all")
    assert parsed.errors_deadletterqueue_context_headers_enable is declared["errors.deadletterqueue.context.headers.enable"]
    assert parsed.errors_log_enable is declared["errors.log.enable"]
    assert parsed.max_records_per_second is None and parsed.max_bytes_per_second is None
    assert parsed.producer_config.bulk_batch_size == BULK_BATCH_SIZE  # the bulk path's, the sink's batches
    assert parsed.producer_config.linger_ms == catalog.SINK_LINGER_MS
    assert parsed.formats.value.format == catalog.option("valueFormat").default
    assert parsed.formats.value.subject_name_strategy == catalog.option("value.subject.name.strategy").default
    assert parsed.formats.registers_schemas is True


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
