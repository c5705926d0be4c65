"""Settings declared once, as Kafka's ``ConfigDef`` declares them: one :class:`ConfigKey` per
setting -- its name, kind, default, bounds or choices, meaning, and whether its value is a
secret -- that parses a value, checks it, redacts it and documents it.

Every scope of settings is a :class:`ConfigDef` of such keys: the producer's Java keys
(``producer.config``, with the SASL and TLS keys the network layer reads), the sink's own options
(``spark.option_catalog``) and the Schema Registry client's (``serialization.registry_settings``).
A scope frames its errors in its own words (the clients' "Invalid value ... for configuration
...", the sink's "option ... must be ..."), but what a key accepts is said here, once, for the
error and for the configuration reference alike.  Each scope is also a :class:`Settings` class
whose body declares its keys as :class:`Declared` attributes named after them
(``linger_ms = ...("linger.ms", ...)``): the code reads ``config.linger_ms``, typed, never
``config["linger.ms"]``.

This module sits at the bottom (beside ``errors`` and ``redaction``): the network layer's SASL
keys and the oauth token source declare theirs with it too.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Generic, Literal, SupportsFloat, TypeVar, overload

from sparkkafka_sink.errors import ConfigError, Message, Setting
from sparkkafka_sink.redaction import REDACTED, is_secret_key, redact

__all__ = ["ConfigKey", "ConfigDef", "Declared", "Invalid", "KeyGroup", "OptionDoc", "Settings", "attribute_for",
           "client_error", "declarations", "number_text", "optional_text", "text", "value_of", "INT_MAX", "LONG_MAX"]

#: Java's int and long: the bounds of most of Kafka's numeric settings
INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1

Kind = Literal["string", "boolean", "integer", "number", "choice", "custom"]
#: what a string key makes of a blank value: refuse it, take it as unset, or keep it as it is
#: (``ssl.endpoint.identification.algorithm=""`` means something)
Blank = Literal["refused", "unset", "value"]


#: why a string was refused, where a scope words that itself: blank, or longer than allowed
Reason = Literal["", "empty", "too long"]


class Invalid(ValueError):
    """A value a key refuses: ``accepted`` says what it takes (a custom key's parser leaves it
    empty: its key's ``accepts`` is filled in); ``detail`` (optional) what is wrong with this
    one, where that says more, ``reason`` which of a string's limits it broke and ``length`` the
    characters counted when it is "too long"."""

    def __init__(self, accepted: str = "", detail: Message | str | None = None, reason: Reason = "",
                 length: int | None = None):
        super().__init__(accepted)
        self.accepted, self.detail, self.reason, self.length = accepted, detail, reason, length


T = TypeVar("T")


@dataclass(frozen=True)
class ConfigKey(Generic[T]):
    """One setting: how it parses, what it accepts, its default and its meaning; ``T``, the
    type of its value (what :meth:`parse` returns)."""

    #: as users write it (a scope that is case-insensitive, as Spark's options are, finds it by
    #: :attr:`key`)
    name: str
    kind: Kind
    #: the value when the setting is not given, as users would write it (parsed as a given one
    #: is); None: unset, and ``unset`` says what that means
    default: Any
    #: what it does, in a sentence or two (Markdown)
    doc: str
    choices: tuple[str, ...] = ()
    #: a choice's other spellings: the choice a text stands for (None: none)
    spelling: Callable[[str], str | None] | None = None
    minimum: float | None = None
    maximum: float | None = None
    #: a number strictly above this
    above: float | None = None
    #: what the number counts: "ms", "bytes", "seconds"...
    unit: str = ""
    #: a string's longest length
    max_length: int | None = None
    blank: Blank = "refused"
    #: ``custom``: the parser (returns the value, or raises :class:`Invalid`) and what it accepts
    parser: Callable[[Any], T] | None = None
    accepts: str = ""
    #: what happens when the setting is not given, where there is no default value
    unset: str = ""
    #: what a value means, in the sink's error messages (e.g. what 0 does)
    hint: str = ""
    #: the value is a secret: never shown (None: as ``redaction`` judges the name)
    secret: bool | None = None
    #: a key whose value may be a Python object (a callable) where a scope of strings (a Spark
    #: option, a properties file line) takes text only: what text may say, and what it means
    #: there -- ``(accepted, meaning)`` for that scope's reference (empty: the same as here)
    as_text: tuple[str, str] | tuple[()] = ()

    @property
    def key(self) -> str:
        return self.name.lower()

    @property
    def is_secret(self) -> bool:
        return is_secret_key(self.name) if self.secret is None else self.secret

    # -- parsing ----------------------------------------------------------------------------
    def parse(self, raw: object) -> T:
        """The value ``raw`` stands for (None: not given, the default's), or :class:`Invalid`."""
        found: Any
        if raw is None:
            found = None if self.default is None else self._value(self.default)
        else:
            found = self._value(raw)
            if found is None and self.kind == "string" and self.blank == "unset":
                found = self.default
        value: T = found  # the kind's parse gives the declared type: the declaration says which
        return value

    def for_column(self, column: str) -> ConfigKey[T]:
        """This declaration of one column's setting, its ``{column}`` placeholders (in the name
        and the texts) filled in: the key's and the value's options are declared once, for both."""
        def filled(text: str) -> str:
            return text.replace("{column}", column)
        return replace(self, name=filled(self.name), doc=filled(self.doc), unset=filled(self.unset),
                       hint=filled(self.hint))

    def _value(self, raw: object) -> object:
        if self.kind == "custom":
            assert self.parser is not None, f"{self.name}: a custom key needs its parser"
            try:
                return self.parser(raw)
            except Invalid as e:
                if e.accepted:
                    raise
                raise Invalid(self.accepts, e.detail, e.reason, e.length) from None
        if self.kind == "string":
            return self._string(raw)
        found: Any
        if self.kind == "boolean":
            if isinstance(raw, bool):
                return raw
            found = {"true": True, "false": False}.get(raw.strip().lower()) if isinstance(raw, str) else None
        elif self.kind == "choice":
            found = self._choice(raw)
        else:
            found = self._number(raw)
        if found is None:
            raise Invalid(self.accepted)
        return found

    def _string(self, raw: object) -> str | None:
        if not isinstance(raw, str):
            raise Invalid(self.accepted)
        text = raw if self.blank == "value" else raw.strip()
        if not text and self.blank != "value":
            if self.blank == "unset":
                return None
            raise Invalid(self.accepted, "it is empty", "empty")
        if self.max_length is not None and len(text) > self.max_length:
            raise Invalid(self.accepted, f"it has {len(text)} characters", "too long", len(text))
        return text

    def _choice(self, raw: object) -> str | None:
        if not isinstance(raw, str):
            return None
        text = raw.strip()
        found = next((c for c in self.choices if c.lower() == text.lower()), None)
        return found if found is not None or self.spelling is None else self.spelling(text)

    def _number(self, raw: object) -> float | int | None:
        if isinstance(raw, bool):
            return None
        try:
            if self.kind == "integer":
                if isinstance(raw, float):
                    if not raw.is_integer():
                        return None
                    raw = int(raw)
                number: float = raw if isinstance(raw, int) else int(str(raw).strip())
            elif isinstance(raw, str):
                number = float(raw.strip())
            elif isinstance(raw, (SupportsFloat, bytes, bytearray)):
                number = float(raw)
            else:
                return None
        except (TypeError, ValueError, OverflowError):
            return None
        if not math.isfinite(number):
            return None
        low_ok = self.minimum is None or number >= self.minimum
        high_ok = self.maximum is None or number <= self.maximum
        above_ok = self.above is None or number > self.above
        return number if low_ok and high_ok and above_ok else None

    # -- saying what it takes ---------------------------------------------------------------
    @property
    def accepted(self) -> str:
        """What the setting accepts, in an error message: "a whole number of milliseconds, at least 0"."""
        if self.kind == "custom":
            return self.accepts
        if self.kind == "boolean":
            return "true or false"
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind == "string":
            return f"1 to {self.max_length} characters" if self.max_length else "a string"
        unit = _UNIT_WORDS.get(self.unit, self.unit)
        if self.kind == "integer":
            what = f"a whole number of {unit}" if unit else "a whole number"
        else:
            what = ("a number" if self.above is None else "a positive number" if self.above == 0
                    else f"a number above {number_text(self.above)}") + (f" ({unit})" if unit else "")
        return what + self._bounds(" from {} to {}", ", at least {}", ", at most {}")

    @property
    def type(self) -> str:
        """What the setting accepts, for the reference: "integer (ms), at least 0"."""
        if self.kind == "custom":
            return self.accepts.removeprefix("an ").removeprefix("a ")
        if self.kind in ("choice", "boolean"):
            return self.accepted
        if self.kind == "string":
            return "string" + (f", 1 to {self.max_length} characters" if self.max_length else "")
        unit = f" ({self.unit})" if self.unit else ""
        above = f", above {number_text(self.above)}" if self.above is not None else ""
        return f"{self.kind}{unit}" + (self._bounds(", {} to {}", ", at least {}", ", at most {}", named=True)
                                       or above)

    def _bounds(self, both: str, low: str, high: str, named: bool = False) -> str:
        def text(value: float) -> str:
            return number_text(value, named)
        if self.minimum is not None and self.maximum is not None:
            return both.format(text(self.minimum), text(self.maximum))
        if self.minimum is not None:
            return low.format(text(self.minimum))
        return high.format(text(self.maximum)) if self.maximum is not None else ""

    @property
    def default_text(self) -> str:
        """The default as users would write it, or what an unset setting means."""
        if self.default is None:
            return self.unset or "unset"
        if isinstance(self.default, bool):
            return str(self.default).lower()
        return str(self.default)

    def shown(self, value: object) -> str:
        """``value`` as a message may show it."""
        return REDACTED if self.is_secret else repr(value)

    def doc_entry(self, prefix: str = "") -> OptionDoc:
        return OptionDoc(prefix + self.name, self.type, self.default_text, self.doc)


@overload
def text(name: str, doc: str, default: str, *, unset: str = "") -> ConfigKey[str]: ...


@overload
def text(name: str, doc: str, default: None = None, *, unset: str = "") -> ConfigKey[str | None]: ...


def text(name: str, doc: str, default: str | None = None, *, unset: str = "") -> ConfigKey[str] | ConfigKey[str | None]:
    """A string kept exactly as given, blank included (as Java's clients keep theirs:
    ``ssl.endpoint.identification.algorithm=""`` means something); typed ``str`` with a default."""
    return ConfigKey(name, "string", default, doc, blank="value", unset=unset)


def optional_text(name: str, doc: str, default: str | None = None, **more: Any) -> ConfigKey[str | None]:
    """A string whose blank value means not given (the registry client's settings)."""
    return ConfigKey(name, "string", default, doc, blank="unset", **more)


@dataclass(frozen=True)
class OptionDoc:
    """A setting as the reference shows it: every field is text for people."""

    name: str
    type: str
    default: str
    doc: str


_UNIT_WORDS = {"ms": "milliseconds"}
#: Java's int and long limits, as the reference names them
_BIG = {INT_MAX: "2³¹−1", LONG_MAX: "2⁶³−1"}


def number_text(value: float, named: bool = False) -> str:
    """A bound as people read it (``named``: Java's int and long limits by name)."""
    if named and value in _BIG:
        return _BIG[int(value)]
    return str(int(value)) if float(value).is_integer() else str(value)


def client_error(key: ConfigKey[Any], raw: object, invalid: Invalid) -> ConfigError:
    """The clients' wording (the producer's, the registry's), as the Java client's."""
    if invalid.detail is not None and key.kind == "custom":
        return ConfigError(Message("Invalid value {} for configuration {!r}: {}", key.shown(raw), Setting(key.name),
                                   invalid.detail))
    return ConfigError(Message("Invalid value {} for configuration {!r}: expected {}", key.shown(raw),
                               Setting(key.name), invalid.accepted))


def value_of(key: ConfigKey[T], raw: object) -> T:
    """``key``'s value given ``raw`` (None: not given), errors in the clients' wording: for a key
    read outside a scope's :class:`ConfigDef` (the SASL settings, a token source)."""
    try:
        return key.parse(raw)
    except Invalid as e:
        raise client_error(key, raw, e) from None


S = TypeVar("S", bound="Settings")


class Settings:
    """One scope's settings, parsed: a subclass declares each as a :class:`Declared` attribute
    (its key), and an instance holds the values by the keys' names, read back as those typed
    attributes.  Two are equal when they are of one class and hold the same values (and the
    same of whatever a subclass keeps beside them)."""

    def __init__(self, values: Mapping[str, Any]):
        """``values``: parsed values by declared name; a setting left out takes its default."""
        #: every declared setting's value, by its name as declared
        self._values: dict[str, Any] = {key.name: values[key.name] if key.name in values else key.parse(None)
                                        for key in declarations(type(self))}

    @classmethod
    def read(cls: type[S], given: Mapping[str, Any]) -> S:
        """The settings of ``given`` (values by name, as given or parsed already; one left out
        takes its default), each checked by its declaration, errors in the clients' wording."""
        return cls({key.name: value_of(key, given.get(key.name)) for key in declarations(cls)})

    def setting(self, key: ConfigKey[T]) -> T:
        """The value of the setting ``key`` declares (where the code goes over several keys; one
        known in advance is read as its attribute)."""
        value: T = self._values[key.name]
        return value

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    __hash__ = None  # type: ignore[assignment]  # (mutable holders of values: as dicts are)


def attribute_for(name: str) -> str:
    """The attribute a setting is read by, named after it: words joined by underscores, in lower
    case (``linger.ms`` -> ``linger_ms``, ``deliveryGuarantee`` -> ``delivery_guarantee``; a
    column's ``{column}Format`` -> ``format``)."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.replace("{column}", ""))
    return re.sub(r"[^A-Za-z0-9]+", "_", words).strip("_").lower()


class Declared(Generic[T]):
    """A setting declared as an attribute of its scope's :class:`Settings` class: the class body
    lists its keys once (:func:`declarations` reads them, in order, for the scope's
    :class:`ConfigDef`), and an instance answers the attribute with the setting's value, typed
    ``T`` for mypy (``config.linger_ms``, an ``int``, instead of ``config["linger.ms"]``, an
    ``Any``)."""

    __slots__ = ("key", "attribute")

    def __init__(self, key: ConfigKey[T]):
        self.key = key
        self.attribute = ""

    def __set_name__(self, owner: type, name: str) -> None:
        if name != attribute_for(self.key.name):
            raise TypeError(f"{owner.__name__}.{name}: a setting's attribute is named after it: "
                            f"{attribute_for(self.key.name)} for {self.key.name!r}")
        self.attribute = name

    @overload
    def __get__(self, instance: None, owner: type) -> Declared[T]: ...

    @overload
    def __get__(self, instance: Settings, owner: type) -> T: ...

    def __get__(self, instance: Settings | None, owner: type) -> Declared[T] | T:
        if instance is None:
            return self
        value: T = instance._values[self.key.name]
        return value


class KeyGroup:
    """Settings a scope takes whole from a declaration of another module's (the SASL keys), in
    their place among the scope's own: read by name, by the module that declared them."""

    def __init__(self, *keys: ConfigKey):
        self.keys = keys


def declarations(settings: type) -> tuple[ConfigKey, ...]:
    """The keys a settings class declares (:class:`Declared` attributes and :class:`KeyGroup`
    members), in the order its body lists them: its bases' first."""
    keys: list[ConfigKey] = []
    for cls in reversed(settings.__mro__):
        for value in vars(cls).values():
            if isinstance(value, Declared):
                keys.append(value.key)
            elif isinstance(value, KeyGroup):
                keys.extend(value.keys)
    return tuple(keys)


class ConfigDef(Mapping[str, ConfigKey]):
    """One scope's settings: each key by its name (by its lower-cased name where the scope is
    case-insensitive, as Spark's options are), parsed with the scope's wording of errors."""

    def __init__(self, keys: Iterable[ConfigKey], *,
                 error: Callable[[ConfigKey, Any, Invalid], Exception] = client_error,
                 case_insensitive: bool = False):
        self.declared: tuple[ConfigKey, ...] = tuple(keys)
        self.case_insensitive = case_insensitive
        self._error = error
        self._keys = {self._find(k.name): k for k in self.declared}
        assert len(self._keys) == len(self.declared), "a setting declared twice"

    def _find(self, name: str) -> str:
        return name.lower() if self.case_insensitive else name

    def __getitem__(self, name: str) -> ConfigKey:
        return self._keys[self._find(name)]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._find(name) in self._keys

    def parse(self, name: str, raw: object) -> Any:
        """The value of setting ``name`` given ``raw`` (None: not given), or the scope's error."""
        key = self[name]
        try:
            return key.parse(raw)
        except Invalid as e:
            raise self._error(key, raw, e) from None

    def parse_all(self, given: Mapping[str, Any], keys: Iterable[ConfigKey] | None = None) -> dict[str, Any]:
        """Every declared setting's value (of ``keys``, a part of them, when given), by its declared
        name; ``given``: the settings as given (lower-cased names where the scope is case-insensitive)."""
        return {k.name: self.parse(k.name, given.get(self._find(k.name))) for k in (keys or self.declared)}

    def close_to(self, name: str, n: int = 1, cutoff: float = 0.6) -> list[str]:
        """The declared names likeliest meant by ``name``."""
        found = difflib.get_close_matches(self._find(str(name)), list(self._keys), n=n, cutoff=cutoff)
        return [self._keys[f].name for f in found]

    def redacted(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """``values`` with every secret's masked, as its declaration says (a name not declared
        here: as ``redaction`` judges it), and credentials in URLs."""
        return redact(values, lambda name: self[name].is_secret if name in self else is_secret_key(name))

    def docs(self, prefix: str = "") -> list[OptionDoc]:
        return [k.doc_entry(prefix) for k in self.declared]
