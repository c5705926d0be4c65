"""One declaration per setting (``config_def``): a key parses, checks, redacts and documents
itself, in every scope -- the producer's keys, the sink's options, the registry's settings."""

from __future__ import annotations

import pytest

from sparkkafka_sink.config_def import ConfigDef, ConfigKey, Invalid, client_error
from sparkkafka_sink.errors import ConfigError
from sparkkafka_sink.producer.config import KEYS
from sparkkafka_sink.redaction import REDACTED
from sparkkafka_sink.serialization.registry_settings import REGISTRY_KEYS
from sparkkafka_sink.spark import option_catalog as catalog
from sparkkafka_sink.spark.sink_errors import SinkValidationError

WAIT = ConfigKey("wait.ms", "integer", 100, "a wait", minimum=0, maximum=1000, unit="ms")
SHARE = ConfigKey("share", "number", None, "a share", above=0, unit="seconds")
FLAG = ConfigKey("flag", "boolean", False, "a flag")
MODE = ConfigKey("mode", "choice", "fast", "a mode", choices=("fast", "SAFE"))
NAME = ConfigKey("name", "string", None, "a name", max_length=5)


@pytest.mark.parametrize("key, raw, value", [
    (WAIT, "250", 250), (WAIT, " 7 ", 7), (WAIT, 8, 8), (WAIT, 9.0, 9), (WAIT, None, 100),
    (SHARE, "0.5", 0.5), (SHARE, 2, 2.0), (SHARE, None, None),
    (FLAG, "TRUE", True), (FLAG, False, False), (FLAG, None, False),
    (MODE, "FAST", "fast"), (MODE, "safe", "SAFE"), (MODE, None, "fast"),
    (NAME, " abc ", "abc"),
])
def test_a_key_parses_what_it_accepts(key, raw, value):
    assert key.parse(raw) == value


@pytest.mark.parametrize("key, raw, accepted", [
    (WAIT, "-1", "a whole number of milliseconds from 0 to 1000"),
    (WAIT, "1001", "a whole number of milliseconds from 0 to 1000"),
    (WAIT, "1.5", "a whole number of milliseconds from 0 to 1000"),
    (WAIT, True, "a whole number of milliseconds from 0 to 1000"),
    (SHARE, "0", "a positive number (seconds)"), (SHARE, "nan", "a positive number (seconds)"),
    (SHARE, "inf", "a positive number (seconds)"),
    (FLAG, "yes", "true or false"), (FLAG, 1, "true or false"),
    (MODE, "slow", "one of fast, SAFE"),
    (NAME, "   ", "1 to 5 characters"), (NAME, "abcdef", "1 to 5 characters"), (NAME, 5, "1 to 5 characters"),
])
def test_a_key_refuses_what_it_does_not_accept_saying_what_it_does(key, raw, accepted):
    with pytest.raises(Invalid) as refused:
        key.parse(raw)
    assert refused.value.accepted == accepted == key.accepted


def test_blank_strings_follow_the_key_s_rule():
    kept = ConfigKey("algorithm", "string", "https", "", blank="value")
    unset = ConfigKey("path", "string", "default", "", blank="unset")
    assert kept.parse("") == "" and kept.parse(" x ") == " x "
    assert unset.parse("  ") == "default"
    with pytest.raises(Invalid):
        ConfigKey("topic", "string", None, "").parse(" ")


def test_a_scope_finds_keys_in_its_case_and_words_its_errors():
    def sink_words(key, raw, invalid):
        return SinkValidationError(f"option '{key.name}' must be {invalid.accepted}")

    sink = ConfigDef([WAIT, MODE], error=sink_words, case_insensitive=True)
    assert "WAIT.MS" in sink and sink["Wait.Ms"] is WAIT
    assert sink.parse_all({"wait.ms": "5"}) == {"wait.ms": 5, "mode": "fast"}
    with pytest.raises(SinkValidationError, match="option 'mode' must be one of fast, SAFE"):
        sink.parse("MODE", "slow")
    client = ConfigDef([WAIT])
    assert "WAIT.MS" not in client and client.close_to("wait.mss") == ["wait.ms"]
    with pytest.raises(ConfigError, match=r"Invalid value '-3' for configuration 'wait.ms': expected a whole number"):
        client.parse("wait.ms", "-3")


def test_secrets_are_redacted_by_their_declaration():
    pin = ConfigKey("pin", "string", None, "", secret=True)
    label = ConfigKey("token.label", "string", None, "", secret=False)  # the name alone would say secret
    scope = ConfigDef([pin, label])
    assert scope.redacted({"pin": "1234", "token.label": "shown", "other.password": "x", "url": "http://u:p@h"}) == {
        "pin": REDACTED, "token.label": "shown", "other.password": REDACTED, "url": f"http://{REDACTED}@h"}
    assert REDACTED in str(client_error(pin, "1234", Invalid("digits")))
    assert "1234" not in str(client_error(pin, "1234", Invalid("digits")))


def test_the_reference_says_what_each_key_accepts():
    assert WAIT.type == "integer (ms), 0 to 1000" and SHARE.type == "number (seconds), above 0"
    assert KEYS["linger.ms"].type == "integer (ms), 0 to 2³¹−1"
    assert KEYS["buffer.memory"].type == "integer (bytes), 0 to 2⁶³−1"
    assert KEYS["acks"].type == "one of all, -1, 0, 1"
    assert (WAIT.default_text, SHARE.default_text, FLAG.default_text) == ("100", "unset", "false")


@pytest.mark.parametrize("scope", [KEYS, catalog.OPTIONS, REGISTRY_KEYS], ids=["producer", "sink", "registry"])
def test_every_setting_of_every_scope_is_declared_whole(scope):
    for key in scope.values():
        assert key.doc, key.name
        assert key.accepted and key.type, key.name
        if key.default is not None:
            key.parse(None)  # the default is a value the key accepts
        else:
            assert key.default_text, key.name


def test_the_sasl_settings_read_only_declared_keys():
    """Every key name the SASL settings read is declared (``sasl_keys``): its default and check
    are the declaration's, and the producer's configuration knows it."""
    from sparkkafka_sink.network.sasl import reading, settings
    from sparkkafka_sink.sasl_keys import SASL

    names = {v for module in (reading, settings) for k, v in vars(module).items()
             if k.isupper() and isinstance(v, str) and v.startswith("sasl.")}
    assert len(names) >= 16 and names <= set(SASL), names - set(SASL)
    assert set(SASL) <= set(KEYS)


def test_a_custom_parser_says_what_is_wrong_and_its_key_what_it_accepts():
    def even(raw: object) -> int:
        number = int(str(raw))
        if number % 2:
            raise Invalid(detail=f"{number} is odd")  # what it accepts is the key's to say
        return number

    key = ConfigKey[int]("even.number", "custom", None, "an even number", parser=even, accepts="an even whole number")
    assert key.parse("4") == 4
    with pytest.raises(Invalid) as refused:
        key.parse("3")
    assert (refused.value.accepted, refused.value.detail) == ("an even whole number", "3 is odd")

    def in_its_own_words(raw: object) -> int:
        raise Invalid("its own words")

    own = ConfigKey[int]("own.words", "custom", None, "", parser=in_its_own_words, accepts="what the key says")
    with pytest.raises(Invalid, match="its own words"):
        own.parse("x")
