"""Binary Arrow arrays viewing concatenated bytes, without a copy; a column in pieces as one array.

Both encoders that build bytes with numpy -- the record batch encoder (``record.arrow``) and the
Avro and JSON encoders (``serialization``) -- hand their results to Arrow this way, so it sits
beside the layers, with the column varints (``varint_columns``).  Both take their input columns
in pieces (a Spark task's batches, grouped) and join them with ``one_array``.
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


def one_array(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``col`` as one array: an array or a column of one piece as it is (Arrow's
    ``combine_chunks`` would copy even that), several pieces joined (a copy)."""
    if not isinstance(col, pa.ChunkedArray):
        return col
    if col.num_chunks == 1:
        return col.chunk(0)
    return col.combine_chunks()
