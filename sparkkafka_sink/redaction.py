"""Which configuration keys hold secrets, and their values hidden for display.

Shared by every layer that shows configuration: the producer's config ``repr`` and error
messages, and the Spark sink's options (Spark's own ``spark.redaction.regex`` does not match
``sasl.jaas.config``).  A key is secret when its name says password, secret, token or jaas, or
when it holds a private key.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

REDACTED = "*********(redacted)"
_SECRET_KEY = re.compile(r"password|secret|token|jaas|(^|\.)ssl\.keystore\.key$|(^|\.)private\.key", re.IGNORECASE)


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(str(key)))


def redact(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` with the values of secret keys (that are set) replaced."""
    return {k: (REDACTED if is_secret_key(k) and v not in (None, "") else v) for k, v in config.items()}
