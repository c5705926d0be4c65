"""Binary Arrow arrays viewing concatenated bytes, without a copy.

Both encoders that build bytes with numpy -- the record batch encoder (``record.arrow``) and the
Avro and JSON encoders (``serialization``) -- hand their results to Arrow this way, so it sits
beside the layers, with the column varints (``varint_columns``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def binary_view_of(data: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """A binary array viewing concatenated bytes (no copy); row i is ``data[offsets[i]:offsets[i + 1]]``."""
    offsets = offsets.astype(np.int32)
    return pa.Array.from_buffers(
        pa.binary(), offsets.shape[0] - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )
