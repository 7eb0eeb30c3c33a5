#
# Copyright (C) ngx_oip_module authors
#
"""Tensors for the tests, encoded independently of the module: the
little-endian bytes of each datatype, and edge values for every one."""

import json
import math
import struct


def bf16(x):
    """BF16 bits of x, through FP32 (fine away from midpoints)."""
    (u,) = struct.unpack("<I", struct.pack("<f", x))
    if math.isnan(x):
        return 0x7fc0
    return (u + 0x7fff + ((u >> 16) & 1)) >> 16


def pack(dt, values):
    """Little-endian tensor bytes, independently of the module."""
    fmt = {"BOOL": "?", "UINT8": "B", "UINT16": "H", "UINT32": "I",
           "UINT64": "Q", "INT8": "b", "INT16": "h", "INT32": "i",
           "INT64": "q", "FP16": "e", "FP32": "f", "FP64": "d"}
    if dt == "BYTES":
        out = b""
        for v in values:
            b = v.encode("utf-8") if isinstance(v, str) else v
            out += struct.pack("<I", len(b)) + b
        return out
    if dt == "BF16":
        return b"".join(struct.pack("<H", bf16(v)) for v in values)
    return struct.pack("<%d%s" % (len(values), fmt[dt]), *values)


INF, NAN = float("inf"), float("nan")

# every datatype, with its edges
CASES = [
    ("BOOL", [True, False, True]),
    ("UINT8", [0, 255, 7]),
    ("UINT16", [0, 65535, 258]),
    ("UINT32", [0, 2 ** 32 - 1, 16909060]),
    ("UINT64", [0, 2 ** 64 - 1, 72623859790382856]),
    ("INT8", [-128, 127, -1]),
    ("INT16", [-32768, 32767, -2]),
    ("INT32", [-2 ** 31, 2 ** 31 - 1, -3]),
    ("INT64", [-2 ** 63, 2 ** 63 - 1, -1]),
    ("FP16", [1.0, -2.0, 65504.0, 6e-08, 0.0, -0.0, INF, -INF, 0.1, NAN]),
    ("BF16", [1.0, 1.015625, -3.0, INF, 0.5, NAN]),
    ("FP32", [0.1, 1e-45, 3.4028234663852886e38, -0.0, INF, 16777216.0,
              NAN]),
    ("FP64", [0.1, 5e-324, 1.7976931348623157e308, -INF, 1e300, NAN]),
    ("BYTES", ["h\u00e9llo", "\u0000a", "", "\U0001f600", "\"\\"]),
]


def dumps(doc):
    return json.dumps(doc, separators=(",", ":")).encode()


def bits(dt, values):
    """Comparable form: the packed bytes (NaN-safe)."""
    return pack(dt, values)
