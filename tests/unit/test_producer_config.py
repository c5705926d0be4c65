"""ProducerConfig: Java key names, parsing of string values, clear errors."""

import pytest

from sparkkafka_sink.errors import ConfigError
from sparkkafka_sink.producer.config import KEYS, ProducerConfig

BS = {"bootstrap.servers": "127.0.0.1:9092"}


def test_defaults_follow_the_java_client():
    c = ProducerConfig(BS)
    assert c["acks"] == -1
    assert c["enable.idempotence"] is True
    assert c["linger.ms"] == 5
    assert c["batch.size"] == 16384
    assert c["buffer.memory"] == 32 * 1024 * 1024
    assert c["max.in.flight.requests.per.connection"] == 5
    assert c["delivery.timeout.ms"] == 120000
    assert c["bootstrap.servers"] == [("127.0.0.1", 9092)]


def test_string_values_are_parsed():
    c = ProducerConfig({**BS, "linger.ms": "20", "enable.idempotence": "false", "acks": "1",
                        "compression.type": "LZ4"})
    assert c["linger.ms"] == 20 and c["enable.idempotence"] is False and c["acks"] == 1
    assert c["compression.type"] == "lz4"


@pytest.mark.parametrize("acks,expected", [("all", -1), ("-1", -1), (-1, -1), (0, 0), ("1", 1)])
def test_acks_forms(acks, expected):
    assert ProducerConfig({**BS, "acks": acks, "enable.idempotence": False})["acks"] == expected


def test_unknown_key_suggests_the_closest():
    with pytest.raises(ConfigError, match=r"Unknown configuration 'linger\.msx'\. Did you mean 'linger\.ms'\?"):
        ProducerConfig({**BS, "linger.msx": 5})


@pytest.mark.parametrize("key,value,allowed", [
    ("linger.ms", -1, "a whole number of milliseconds from 0 to 2147483647"),
    ("linger.ms", "soon", "a whole number of milliseconds from 0 to 2147483647"),
    ("batch.size", 1.5, "a whole number of bytes"),
    ("acks", "2", "one of all, -1, 0, 1"),
    ("compression.type", "brotli", "one of none, gzip, snappy, lz4, zstd"),
    ("enable.idempotence", "yes", "true or false"),
    ("max.in.flight.requests.per.connection", 0, "a whole number from 1 to"),
])
def test_bad_values_name_key_value_and_range(key, value, allowed):
    with pytest.raises(ConfigError) as e:
        ProducerConfig({**BS, key: value})
    assert f"'{key}'" in str(e.value) and repr(value) in str(e.value)
    assert e.match(allowed)


def test_missing_or_bad_bootstrap():
    with pytest.raises(ConfigError, match="Missing required configuration 'bootstrap.servers'"):
        ProducerConfig({})
    with pytest.raises(ConfigError, match="'localhost' is not host:port"):
        ProducerConfig({"bootstrap.servers": "localhost"})
    with pytest.raises(ConfigError, match="port in"):
        ProducerConfig({"bootstrap.servers": "h:99999"})


def test_explicit_idempotence_conflicts_are_rejected_like_java():
    with pytest.raises(ConfigError, match="acks must be 'all'"):
        ProducerConfig({**BS, "enable.idempotence": True, "acks": 1})
    with pytest.raises(ConfigError, match="max.in.flight.requests.per.connection must be <= 5"):
        ProducerConfig({**BS, "enable.idempotence": "true", "max.in.flight.requests.per.connection": 6})
    with pytest.raises(ConfigError, match="retries must be > 0"):
        ProducerConfig({**BS, "enable.idempotence": True, "retries": 0})


def test_default_idempotence_yields_to_explicit_acks():
    c = ProducerConfig({**BS, "acks": 1})
    assert c["enable.idempotence"] is False


def test_delivery_timeout_must_cover_linger_plus_request_timeout():
    with pytest.raises(ConfigError, match=r"delivery.timeout.ms \(1000\) must be >= linger.ms \+ request.timeout.ms"):
        ProducerConfig({**BS, "delivery.timeout.ms": 1000, "request.timeout.ms": 2000})
    assert ProducerConfig({**BS, "request.timeout.ms": 200000})["delivery.timeout.ms"] == 200005


def test_transactional_id_needs_idempotence():
    assert ProducerConfig({**BS, "transactional.id": "tx"})["transaction.timeout.ms"] == 60000
    with pytest.raises(ConfigError, match="transactional.id needs idempotence"):
        ProducerConfig({**BS, "transactional.id": "tx", "enable.idempotence": False})
    with pytest.raises(ConfigError, match="'transactional.id'"):
        ProducerConfig({**BS, "transactional.id": " "})


def test_the_bulk_path_fills_batches_of_its_own_size_unless_batch_size_is_set():
    assert ProducerConfig(BS).bulk_batch_size == 262_144  # Java's 16 KiB would cost ~4x the CPU per byte
    assert ProducerConfig({**BS, "batch.size": 16384}).bulk_batch_size == 16384  # set: honoured
    assert ProducerConfig({**BS, "buffer.memory": 100_000}).bulk_batch_size == 100_000  # never above the buffer


# -- settings read as typed attributes, not by string keys ------------------------------------------
def test_each_producer_setting_is_a_typed_attribute_named_after_its_key():
    """``config.linger_ms`` is ``config["linger.ms"]``: every key ``ProducerConfig`` declares is
    an attribute named after it (dots as underscores), bound to the key ``KEYS`` holds; only
    the SASL, login and TLS keys, declared for the network layer and read there (the TLS keys as
    ``config.tls``), are not."""
    from sparkkafka_sink.config_def import Declared
    from sparkkafka_sink.sasl_keys import LOGIN_KEYS, SASL_KEYS
    from sparkkafka_sink.tls_keys import TLS_KEYS

    config = ProducerConfig({"bootstrap.servers": "h:9092", "linger.ms": "7", "acks": "1",
                             "enable.idempotence": "false", "transactional.id": None})
    declared = {d.key.name: d for d in vars(ProducerConfig).values() if isinstance(d, Declared)}
    group = {k.name for k in (*SASL_KEYS, *LOGIN_KEYS, *TLS_KEYS)}
    assert set(declared) == set(KEYS) - group
    for name, attribute in declared.items():
        assert attribute.attribute == name.replace(".", "_"), name
        assert attribute.key is KEYS[name]
        assert getattr(config, attribute.attribute) == config[name], name
    assert (config.linger_ms, config.acks, config.enable_idempotence) == (7, 1, False)
    assert config.bootstrap_servers == [("h", 9092)]
    assert config.tls.ssl_protocol == config["ssl.protocol"] == "TLSv1.3"


#: string-keyed reads of names of the producer's settings (``x["linger.ms"]``, ``x.get("acks")``)
#: left outside ``producer/config.py``, module by module: none (a key written into another
#: client's settings, as the tests' confluent-kafka readers' are, is not a read).
STRING_READS_LEFT: dict[str, int] = {}


def _string_reads(path, keys) -> int:
    import ast

    count = 0
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Constant):
            count += node.slice.value in keys  # (a key written into a mapping is not read: another client's)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("get", "pop", "setdefault") and node.args
              and isinstance(node.args[0], ast.Constant)):
            count += node.args[0].value in keys
    return count


def test_the_producer_s_settings_are_read_by_attribute_outside_their_declarations():
    from pathlib import Path

    import sparkkafka_sink

    root = Path(sparkkafka_sink.__file__).parent
    found = {str(p.relative_to(root)): n for p in sorted(root.rglob("*.py"))
             if p.name != "config.py" or p.parent.name != "producer"
             if (n := _string_reads(p, set(KEYS)))}
    over = {m: (n, STRING_READS_LEFT.get(m, 0)) for m, n in found.items() if n > STRING_READS_LEFT.get(m, 0)}
    assert not over, f"settings read by string key (read the typed attribute instead): {over}"


def test_the_sink_s_options_are_read_by_attribute_outside_their_declarations():
    """The sink's own options (``spark/option_catalog.py``) are read as the plan's typed
    attributes (``options.coalesce_bytes``), never by name (``values["coalesceBytes"]``) -- but
    where the name is a DataFrame column's too (``topic``: ``spark/driver/validation.py`` reads
    the columns found)."""
    from pathlib import Path

    import sparkkafka_sink
    from sparkkafka_sink.spark import option_catalog as catalog

    names = set(catalog.OPTIONS) | {k.name for k in catalog.OPTIONS.values()}
    root = Path(sparkkafka_sink.__file__).parent
    found = {str(p.relative_to(root)): n for p in sorted(root.rglob("*.py"))
             if p.name != "option_catalog.py" if (n := _string_reads(p, names))}
    assert found == {"spark/driver/validation.py": 1}, f"options read by name (read the attribute instead): {found}"
