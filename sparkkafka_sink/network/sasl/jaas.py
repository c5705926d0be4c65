"""``sasl.jaas.config`` parsing, token for token as Kafka's JaasConfig (java.io.StreamTokenizer).

Users paste Java configs such as::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="alice" password="s3cr=t";

so we accept exactly what Kafka accepts: ``<LoginModule> <flag> (<name>=<value>)* ;`` with
``//`` and ``/* */`` comments, single or double quotes with Java escapes, unquoted words of
letters, digits, ``. - _ $``, flags required/requisite/sufficient/optional in any case, and one
login module entry (a client has one).  Stricter in one place: an unterminated quote is an
error (StreamTokenizer silently ends it at the line's end).

Option values are secrets: errors say which option and what is wrong, never a value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sparkkafka_sink.errors import ConfigError, Message, Setting

KEY = "sasl.jaas.config"
FLAGS = ("required", "requisite", "sufficient", "optional")

# StreamTokenizer's default syntax table plus Kafka's wordChars('-'), ('_'), ('$')
_WORD_START = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_$")
_NUMERIC = set("0123456789.-")
_QUOTES = ("'", '"')
_ESCAPES = {"a": "\x07", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}


@dataclass(frozen=True)
class JaasConfig:
    """One login module entry; ``options`` are secrets, so they never appear in the repr."""

    login_module: str
    flag: str
    options: Mapping[str, str] = field(repr=False)

    @property
    def module_name(self) -> str:
        """The class's simple name, so shaded copies (``kafkashaded.org.apache...``) match too."""
        return self.login_module.rsplit(".", 1)[-1]

    def __repr__(self) -> str:
        return (f"JaasConfig(login_module={self.login_module!r}, flag={self.flag!r}, "
                f"options=[{', '.join(map(repr, self.options))}])")

    def with_option(self, name: str, value: str) -> JaasConfig:
        return JaasConfig(self.login_module, self.flag, {**self.options, name: value})

    def render(self) -> str:
        """The entry as ``sasl.jaas.config`` text (each value double-quoted, escaped), which
        :func:`parse_jaas` reads back to this entry."""
        def quoted(value: str) -> str:
            return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

        options = "".join(f" {k}={quoted(v)}" for k, v in self.options.items())
        return f"{self.login_module} {self.flag}{options};"


def _error(what: str) -> ConfigError:
    return ConfigError(Message("Invalid configuration {!r}: {}", Setting(KEY), what))


# Token kinds: ("word", text), ("number", None), ("quoted", text), ("char", c), ("eof", None)
_Token = tuple[str, "str | None"]


class _Tokenizer:
    """The subset of java.io.StreamTokenizer JaasConfig relies on."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def _is_word_char(self, c: str) -> bool:
        return c in _WORD_START or c in _NUMERIC or ord(c) >= 160

    def next(self) -> _Token:
        text, n = self.text, len(self.text)
        while True:
            while self.pos < n and ord(text[self.pos]) <= 32:   # whitespace: \0 .. ' '
                self.pos += 1
            if self.pos >= n:
                return ("eof", None)
            c = text[self.pos]
            if c in _NUMERIC:
                # parseNumbers(): '-', '.' and digits start a number (no sval: not a value)
                if c == "-" and not (self.pos + 1 < n and (text[self.pos + 1] == "." or text[self.pos + 1].isdigit())):
                    self.pos += 1
                    return ("char", "-")
                self.pos += 1
                seen_dot = c == "."
                while self.pos < n and (text[self.pos].isdigit() and text[self.pos].isascii()
                                        or (text[self.pos] == "." and not seen_dot)):
                    seen_dot = seen_dot or text[self.pos] == "."
                    self.pos += 1
                return ("number", None)
            if c in _WORD_START or ord(c) >= 160:
                start = self.pos
                while self.pos < n and self._is_word_char(text[self.pos]):
                    self.pos += 1
                return ("word", text[start:self.pos])
            if c in _QUOTES:
                return ("quoted", self._quoted(c))
            if c == "/":
                nxt = text[self.pos + 1] if self.pos + 1 < n else ""
                if nxt == "*":
                    end = text.find("*/", self.pos + 2)
                    if end < 0:
                        return ("eof", None)                   # as StreamTokenizer does
                    self.pos = end + 2
                    continue
                # '//', and a lone '/' (the default comment char): a comment to the end of the
                # line -- after the character following the '/', which StreamTokenizer has
                # already consumed: "/" then a newline comments out the next line too
                self.pos += 2
                self._skip_line()
                continue
            self.pos += 1
            return ("char", c)

    def _skip_line(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] not in "\r\n":
            self.pos += 1

    def _quoted(self, quote: str) -> str:
        text, n = self.text, len(self.text)
        self.pos += 1
        out: list[str] = []
        while True:
            if self.pos >= n or text[self.pos] in "\r\n":
                raise _error("a quoted value is not closed before the end of the line")
            c = text[self.pos]
            if c == quote:
                self.pos += 1
                return "".join(out)
            if c != "\\":
                out.append(c)
                self.pos += 1
                continue
            self.pos += 1                                      # Java escapes
            if self.pos >= n:
                raise _error("a quoted value ends with a lone backslash")
            e = text[self.pos]
            if "0" <= e <= "7":                                # octal \0 .. \377
                digits = e
                self.pos += 1
                limit = 3 if e <= "3" else 2
                while len(digits) < limit and self.pos < n and "0" <= text[self.pos] <= "7":
                    digits += text[self.pos]
                    self.pos += 1
                out.append(chr(int(digits, 8)))
                continue
            out.append(_ESCAPES.get(e, e))                    # \" \\ \' and unknown: the char
            self.pos += 1


def _describe(token: _Token) -> str:
    kind, text = token
    if kind == "eof":
        return "the end of the text"
    if kind == "char":
        return repr(text)
    return "a number" if kind == "number" else "a value"       # never show what a value is


def parse_jaas(text: str) -> JaasConfig:
    """Parse a client's ``sasl.jaas.config``: exactly one login module entry."""
    if not isinstance(text, str):
        raise ConfigError(Message("Invalid configuration {!r}: expected a string, got {}", Setting(KEY),
                                  type(text).__name__))
    tokens = _Tokenizer(text)
    entries: list[JaasConfig] = []
    token = tokens.next()
    while token[0] != "eof":
        entries.append(_entry(tokens, token))
        token = tokens.next()
    if not entries:
        raise _error("no login module given (expected '<LoginModule> required <name>=\"<value>\" ...;')")
    if len(entries) > 1:
        raise _error(f"{len(entries)} login modules given ({', '.join(e.login_module for e in entries)}); "
                     "a client uses exactly one")
    return entries[0]


def _entry(tokens: _Tokenizer, first: _Token) -> JaasConfig:
    kind, module = first
    if kind not in ("word", "quoted") or not module:
        raise _error(f"expected a login module class name, found {_describe(first)}")
    flag_token = tokens.next()
    if flag_token[0] == "eof":
        raise _error(f"no control flag after the login module '{module}' "
                     f"(expected one of {', '.join(FLAGS)})")
    flag = (flag_token[1] or "").lower() if flag_token[0] in ("word", "quoted") else None
    if flag not in FLAGS:
        shown = repr(flag_token[1]) if flag_token[0] == "word" else _describe(flag_token)
        raise _error(f"invalid control flag {shown} after the login module '{module}' "
                     f"(expected one of {', '.join(FLAGS)})")
    options: dict[str, str] = {}
    token = tokens.next()
    while token[0] != "eof" and token != ("char", ";"):
        kind, name = token
        if kind not in ("word", "quoted") or not name:
            raise _error(f"expected an option name or ';' in the options of '{module}', found "
                         f"{_describe(token)}")
        if tokens.next() != ("char", "="):
            raise _error(f"value not specified for option '{name}' (expected {name}=\"value\")")
        value_kind, value = tokens.next()
        if value_kind not in ("word", "quoted") or value is None:
            raise _error(f"value not specified for option '{name}' (quote values that start with "
                         "a digit, '-' or '.', or hold other characters than letters, digits, "
                         "'.', '-', '_' and '$')")
        options[name] = value                                  # a repeated option: the last wins
        token = tokens.next()
    if token[0] == "eof":
        raise _error(f"the entry for '{module}' is not terminated by a semicolon")
    return JaasConfig(module, flag, options)


def keytab_of(text: str | None) -> str | None:
    """The keytab file a ``Krb5LoginModule`` line names (``keyTab``), or None."""
    if not text or "Krb5LoginModule" not in text:
        return None
    jaas = parse_jaas(text)
    return jaas.options.get("keyTab") if jaas.module_name == "Krb5LoginModule" else None
