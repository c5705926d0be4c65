"""Varints of whole columns at once: numpy functions that encode zigzag varints of many values
in one pass.

Beside the layers: the record batch encoder (``record.arrow``, ``record.batch``) and the Avro
encoder (``serialization.avro_encoder``) both build on them.  The scalar codec (row path,
protocol) is ``sparkkafka_sink.varint``, re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "zigzag",
    "unzigzag",
    "encode_unsigned_varint",
    "encode_varint",
    "encode_varlong",
    "decode_unsigned_varint",
    "decode_varint",
    "decode_varlong",
    "size_of_unsigned_varint",
    "size_of_varint",
    "size_of_varlong",
    "varint_bytes",
    "SMALL_LIMIT",
    "SMALL_VARINTS",
    "zigzag_np",
    "unsigned_varint_sizes_np",
    "length_varint_sizes_np",
    "encode_unsigned_varints_np",
    "encode_varints",
    "encode_varint_rows",
    "pack_varint_rows",
    "pack_words",
    "varint_words",
    "unsigned_varint_words",
]

from sparkkafka_sink.varint import (  # the scalar codec, re-exported
    SMALL_LIMIT,
    SMALL_VARINTS,
    decode_unsigned_varint,
    decode_varint,
    decode_varlong,
    encode_unsigned_varint,
    encode_varint,
    encode_varlong,
    size_of_unsigned_varint,
    size_of_varint,
    size_of_varlong,
    unzigzag,
    varint_bytes,
    zigzag,
)

# ----------------------------------------------------------------------------- vectorized (numpy)


def zigzag_np(values: npt.ArrayLike) -> np.ndarray:
    """Zigzag an int64 column to uint64."""
    a = np.asarray(values, dtype=np.int64)
    return ((a << 1) ^ (a >> 63)).view(np.uint64)


def unsigned_varint_sizes_np(u: np.ndarray) -> np.ndarray:
    """Encoded byte count (1..10) of each uint64, as int64 (one compare per byte actually used)."""
    u = np.asarray(u, dtype=np.uint64)
    sizes = np.ones(u.shape, dtype=np.int64)
    top = int(u.max()) if u.size else 0
    threshold = 1 << 7
    while threshold <= top:
        sizes += u >= np.uint64(threshold)
        threshold <<= 7
    return sizes


def length_varint_sizes_np(x: npt.ArrayLike) -> np.ndarray:
    """Encoded byte count of the zigzag varint of each int64 >= -1 (lengths, -1 for null; offset
    deltas; record sizes), as int64.  zigzag(x) is 2x (1 for -1), so the size is counted on x
    itself: no zigzag pass, one compare per byte actually used."""
    x = np.asarray(x, dtype=np.int64)
    sizes = np.ones(x.shape, dtype=np.int64)
    top = int(x.max()) if x.size else 0
    threshold = 1 << 6
    while threshold <= top:
        sizes += x >= threshold
        threshold <<= 7
    return sizes


def _varint_bytes(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Encode uint64s of any shape: ``(groups uint8[..., width], sizes int64[...])``.

    ``groups[..., :sizes]`` is each value's encoding; later positions are zero.
    """
    sizes = unsigned_varint_sizes_np(u)
    width = int(sizes.max()) if sizes.size else 1
    groups = np.empty(u.shape + (width,), dtype=np.uint8)
    rest = u
    for k in range(width):
        group = (rest & np.uint64(0x7F)).astype(np.uint8)
        if k < width - 1:
            group |= (sizes > k + 1).view(np.uint8) << np.uint8(7)
            rest = rest >> np.uint64(7)
        groups[..., k] = group
    return groups, sizes


def encode_unsigned_varints_np(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Encode a uint64 column: ``(data uint8, sizes int64)``; data is all encodings concatenated."""
    groups, sizes = _varint_bytes(np.asarray(u, dtype=np.uint64))
    if groups.shape[-1] == 1:
        return groups[:, 0], sizes
    return groups[np.arange(groups.shape[-1]) < sizes[..., None]], sizes


def varint_words(col: npt.ArrayLike, nonnegative: bool = False) -> tuple[Any, Any]:  # arrays, scalars or None
    """``(word, bits)``: each value's zigzag varint as a little-endian uint64 and its size in
    bits -- scalars for an int ``col`` -- or ``(None, None)`` if some encoding needs more than 8
    bytes.  ``nonnegative`` skips the sign handling of zigzag when the caller knows."""
    if isinstance(col, (int, np.integer)):
        enc = encode_unsigned_varint(zigzag(int(col)))
        if len(enc) > 8:
            return None, None
        return np.uint64(int.from_bytes(enc, "little")), np.uint64(8 * len(enc))
    if nonnegative:
        z = np.asarray(col, dtype=np.int64).view(np.uint64) << np.uint64(1)
    else:
        z = zigzag_np(col)
    return unsigned_varint_words(z)


def unsigned_varint_words(z: np.ndarray) -> tuple[Any, Any]:
    """``(word, bits)`` of each uint64's plain (unsigned) varint, as :func:`varint_words` --
    Protobuf's int32/int64/bool/enum wire form -- or ``(None, None)`` past 8 bytes."""
    top = int(z.max()) if z.size else 0
    if top < _LUT_LIMIT:
        lut_word, lut_bits = _luts()
        index = z.view(np.int64)  # numpy converts a uint64 index to intp first: a pass of its own
        return lut_word.take(index), lut_bits.take(index)
    if top >= 1 << 56:
        return None, None
    return _words_of(z)


def pack_words(pairs: Sequence[tuple[Any, Any]]) -> tuple[np.ndarray, np.ndarray] | None:
    """Concatenate per-row varints given as ``(word, bits)`` pairs (see :func:`varint_words`).

    Returns ``(words uint64[n], sizes int64[n])`` -- row i's bytes are the low ``sizes[i]``
    bytes of ``words[i]`` -- or None when some row needs more than 8 bytes.
    """
    if any(w is None for w, _ in pairs):
        return None
    n = next((w.shape[0] for w, _ in pairs if isinstance(w, np.ndarray)), None)
    if n is None:
        raise ValueError("at least one column must be an array")
    word, bits = pairs[0]
    word = np.broadcast_to(word, (n,)).copy()
    bits = np.broadcast_to(bits, (n,)).copy()
    for w, b in pairs[1:]:
        word |= w << bits
        bits += b
    sizes = (bits >> np.uint64(3)).astype(np.int64)
    if n and int(sizes.max()) > 8:
        return None
    return word, sizes


def pack_varint_rows(columns: Iterable[npt.ArrayLike]) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`pack_words` of the zigzag varints of several columns (ints are constants)."""
    return pack_words([varint_words(c) for c in columns])


def encode_varint_rows(columns: Sequence[int | np.integer | np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints of several int64 columns, concatenated per row: ``(data, sizes)``.

    Row i of the result is ``varint(c0[i]) + varint(c1[i]) + ...``; data holds the rows back to
    back.  A column may be a plain int, meaning that value on every row.
    """
    packed = pack_varint_rows(columns)
    if packed is None:
        n = next(len(c) for c in columns if not isinstance(c, (int, np.integer)))
        return _encode_varint_rows_general(columns, n)
    word, sizes = packed
    n = sizes.shape[0]
    width = int(sizes.max()) if n else 0
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    total = int(starts[-1])
    out = np.empty(total + 8, dtype=np.uint8)
    starts = starts[:-1]
    # Store each row's word at its start, high bytes first: a row's junk high bytes land where
    # the next row starts, and that row's own bytes, stored later, overwrite them.
    for j in range(width - 1, -1, -1):
        out[starts + j] = (word >> np.uint64(8 * j)).astype(np.uint8)
    return out[:total], sizes


def _encode_varint_rows_general(columns: Sequence[int | np.integer | np.ndarray],
                                n: int) -> tuple[np.ndarray, np.ndarray]:
    zz = [
        zigzag_np(np.full(n, c, np.int64) if isinstance(c, (int, np.integer)) else c)
        for c in columns
    ]
    groups, sizes = _varint_bytes(np.stack(zz, axis=1))
    data = groups[np.arange(groups.shape[-1]) < sizes[..., None]]
    return data, sizes.sum(axis=1)


# Values below 2**14 encode in at most two bytes: tables of the encoding as a little-endian word
# and of its size in bits (128 KiB each, cache friendly), built on first use.
_LUT_LIMIT = 1 << 14
_LUTS: tuple | None = None


def _luts() -> tuple[np.ndarray, np.ndarray]:
    global _LUTS
    if _LUTS is None:  # a racing thread just builds the same tables
        _LUTS = _words_of(np.arange(_LUT_LIMIT, dtype=np.uint64))
    return _LUTS


def _words_of(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    groups, sizes = _varint_bytes(z)  # bytes past a value's size are zero
    word = np.zeros(z.shape, dtype=np.uint64)
    for k in range(groups.shape[1]):
        word |= groups[:, k].astype(np.uint64) << np.uint64(8 * k)
    return word, (sizes * 8).astype(np.uint64)


def encode_varints(values: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag-encode an int64 column: ``(data uint8, offsets int64[n+1])``.

    Record ``i``'s bytes are ``data[offsets[i]:offsets[i+1]]``.
    """
    data, sizes = encode_unsigned_varints_np(zigzag_np(values))
    offsets = np.zeros(sizes.shape[0] + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return data, offsets
