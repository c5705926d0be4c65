"""Errors carry the configuration keys they name as data (``errors.Setting`` in an
``errors.Message``), so the Spark sink shows its users' option names without rewriting any text:
no message text below the Spark layer spells a key, and the sink renders each in one place."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import sparkkafka_sink
from sparkkafka_sink.errors import ConfigError, KafkaTimeoutError, Message, Setting, named
from sparkkafka_sink.producer.config import KEYS
from sparkkafka_sink.serialization.registry_settings import REGISTRY_KEYS

ROOT = Path(sparkkafka_sink.__file__).parent
#: where the keys are the users' own words, or no message is made
OUTSIDE = {"spark", "testing", "demo.py", "examples", "transactions.py"}
#: calls whose text is a declaration (a key's documentation: ``config_def``'s keys and string
#: keys, and a scope's helpers making them, named ``_..._key``), or marks its keys itself (the
#: Java keys' reasons, `key` in backticks): not a message
DECLARATIONS = {"ConfigKey", "Declared", "ConfigDef", "text", "optional_text", "_noted", "_refused"}


def _key_pattern() -> re.Pattern[str]:
    dotted = sorted({k for k in (*KEYS, *REGISTRY_KEYS) if "." in k}, key=len, reverse=True)
    plain = sorted({k for k in (*KEYS, *REGISTRY_KEYS) if "." not in k}, key=len, reverse=True)
    return re.compile(r"(?<![\w.-])(" + "|".join(map(re.escape, dotted)) + r")(?![\w-]|\.\w)"
                      + r"|'(" + "|".join(map(re.escape, plain)) + r")'")


def _texts(node: ast.AST) -> list[str]:
    """The literal text of an expression: its string constants and f-strings' literal parts, and
    ``{key}`` for a variable named like a key formatted into an f-string."""
    texts = [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    for f in (n for n in ast.walk(node) if isinstance(n, ast.FormattedValue)):
        name = ast.unparse(f.value)
        if re.search(r"(^|_)key$|^(key|setting)s?\b", name.split(".")[-1]):
            texts.append(f"a key formatted in: {{{name}}}")
    return texts


def _message_texts(tree: ast.AST) -> list[tuple[int, str]]:
    """Text that may become a message: inside ``raise``, or an argument of any call (an error's,
    a ``Message``, a helper that makes the error from it) but the declarations'."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            found += [(node.lineno, t) for t in _texts(node.exc)]
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name not in DECLARATIONS and not re.fullmatch(r"_\w+_key", name):
                found += [(node.lineno, t) for arg in (*node.args, *(k.value for k in node.keywords))
                          for t in _texts(arg)]
    return found


def test_no_message_below_the_spark_layer_spells_a_configuration_key():
    pattern = _key_pattern()
    offenders = set()
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if relative.parts[0] in OUTSIDE:
            continue
        for line, text in _message_texts(ast.parse(path.read_text())):
            if text.startswith("a key formatted in: "):
                offenders.add(f"{relative}:{line}: {text}")
            elif " " in text and (m := pattern.search(text)):
                offenders.add(f"{relative}:{line}: {m.group(0)!r} in {text!r}")
    assert not offenders, "keys written into message text (pass them as errors.Setting):\n" + "\n".join(
        sorted(offenders))


def test_a_message_renders_its_settings_with_the_callers_names():
    inner = KafkaTimeoutError(Message("gave up after {} ({})", "5 s", Setting("max.block.ms")))
    error = ConfigError(Message("{!r} must be at most {}, got {!r}: {}", Setting("linger.ms"), 100, "linger.ms", inner))
    assert str(error) == "'linger.ms' must be at most 100, got 'linger.ms': gave up after 5 s (max.block.ms)"
    # the value given stays as it was, though it looks like a key: only Settings are renamed
    assert named(error, lambda key: "kafka." + key) == (
        "'kafka.linger.ms' must be at most 100, got 'linger.ms': gave up after 5 s (kafka.max.block.ms)")


def test_a_plain_message_is_left_as_it_is():
    assert named(ConfigError("no keys here"), lambda key: "kafka." + key) == "no keys here"


@pytest.mark.parametrize("raw, shown", [
    ({"bootstrap.servers": "x:1", "linger.ms": "-1"}, "'kafka.linger.ms'"),
    ({"bootstrap.servers": "x:1", "linger.mss": "1"}, "'kafka.linger.mss'"),
    ({"bootstrap.servers": "x:1", "security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "dns"},
     "'kafka.ssl.endpoint.identification.algorithm'"),
    ({"bootstrap.servers": "x:1", "acks": "1", "enable.idempotence": "true"}, "kafka.acks must be 'all'"),
])
def test_the_sink_names_producer_settings_as_its_options(raw, shown):
    from sparkkafka_sink.spark.options import parse_options
    from sparkkafka_sink.spark.sink_errors import SinkValidationError

    options = {"kafka." + k: v for k, v in raw.items()} | {"topic": "t"}
    with pytest.raises(SinkValidationError) as caught:
        parse_options(options)
    assert shown in str(caught.value)
