"""The two ways regrouped rows are encoded (``record.arrow``), chosen for a test."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pyarrow as pa
import pytest

PATHS = ("views", "copy")


@contextlib.contextmanager
def encoder_path(path: str) -> Iterator[None]:
    """Regrouped rows encoded from views of their bytes ("views": every take, whatever the
    rows' sizes) or taken by Arrow first ("copy": the path of short rows and of pyarrow < 19)."""
    from sparkkafka_sink.record import arrow

    if path == "views" and not arrow._VIEW_JOIN:
        pytest.skip(f"pyarrow {pa.__version__} cannot cast views over several buffers (needs 19 or newer)")
    before = arrow.VIEW_JOIN_MIN_BYTES
    arrow.VIEW_JOIN_MIN_BYTES = 0 if path == "views" else 1 << 62
    try:
        yield
    finally:
        arrow.VIEW_JOIN_MIN_BYTES = before
