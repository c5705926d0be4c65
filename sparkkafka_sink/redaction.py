"""Which configuration keys hold secrets, and their values hidden for display.

Shared by every layer that shows configuration: the producer's config ``repr`` and error
messages, and the Spark sink's options (Spark's own ``spark.redaction.regex`` does not match
``sasl.jaas.config``).  A key is secret when its name says password, secret, token or jaas, when
it holds a private key, or ``user.info`` (the Schema Registry's ``basic.auth.user.info``,
``user:password``).  A URL's ``user:password@`` (a registry ``url`` may carry one) is masked in
any value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

REDACTED = "*********(redacted)"
_SECRET_KEY = re.compile(r"password|secret|token|jaas|user\.info|(^|\.)ssl\.keystore\.key$|(^|\.)private\.key",
                         re.IGNORECASE)
#: ``scheme://user:password@`` in a value
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s,]+@")


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(str(key)))


def redact(config: Mapping[str, Any], secret: Callable[[str], bool] = is_secret_key) -> dict[str, Any]:
    """A copy of ``config`` with the values of secret keys (that are set; ``secret`` judges a key)
    replaced, and credentials in URLs masked."""
    return {k: (REDACTED if secret(k) and v not in (None, "") else _mask_url_credentials(v))
            for k, v in config.items()}


def _mask_url_credentials(value: Any) -> Any:
    if isinstance(value, str) and "@" in value and "://" in value:
        return _URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", value)
    return value
