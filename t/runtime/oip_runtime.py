#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""An example Open Inference Protocol runtime, for the demo and the tests.

It speaks KServe v2 / Triton HTTP the way Triton's HTTP frontend does:
JSON and binary tensor data (Inference-Header-Content-Length), raw binary
requests for one-input models, {"error": ...} bodies, gzip/deflate bodies,
compressed responses, model metadata and health endpoints.

    oip_runtime.py --port 8001 [--family triton|kserve|openvino|mlserver]

--family imitates the runtimes the gateway is deployed in front of, habits
included, as their sources show them (docs/upstreams.md has the list):
  triton    a listed output is binary if its binary_data is true; without
            an outputs list, binary_data_output decides for all of them;
            a null where an object, array or string belongs is refused
  kserve    (0.15) as Triton for outputs (kserve#5907: listed outputs
            ignore binary_data_output), no raw binary; JSON answers write
            null for every member without a value (id, model_version,
            parameters, each output's parameters) and NaN as null;
            binary answers carry a lower-case IHCL, no Content-Type and
            come chunked; a binary body without a non-JSON Content-Type is
            read as JSON by FastAPI: 422 {"detail": [...]}; versioned
            paths answer 501; health answers {"live": true}
  openvino  binary_data_output is the default of listed outputs only;
            with no outputs list everything is JSON; no raw binary;
            binary answers say Content-Type: application/json
  mlserver  (1.3) JSON only, no binary extension: a binary body, or NaN
            and Infinity (orjson), is 422 {"detail": [...]}; outputs and
            binary_data* are ignored: every output is answered, as JSON;
            FP16 numbers are read, BF16 is not (500); outputs carry
            "parameters": {"content_type": "np"}; a model that fails is a
            text/plain 500 "Internal Server Error"; health answers are
            empty 200s ("jsononly" is an alias, the name it had)

Standard library only.
"""

import argparse
import gzip
import json
import math
import re
import signal
import struct
import sys
import threading
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# datatype -> (struct format, element size); BF16 and BYTES are special
DTYPES = {
    "BOOL": ("?", 1), "UINT8": ("B", 1), "UINT16": ("H", 2),
    "UINT32": ("I", 4), "UINT64": ("Q", 8), "INT8": ("b", 1),
    "INT16": ("h", 2), "INT32": ("i", 4), "INT64": ("q", 8),
    "FP16": ("e", 2), "BF16": (None, 2), "FP32": ("f", 4),
    "FP64": ("d", 8), "BYTES": (None, 0),
}

INTS = {"UINT8", "UINT16", "UINT32", "UINT64",
        "INT8", "INT16", "INT32", "INT64"}

IHCL = "Inference-Header-Content-Length"


class InferError(Exception):
    """An error answered as {"error": message}, the protocol's shape."""

    def __init__(self, message, status=400):
        super().__init__(message)
        self.status = status

    def answer(self):
        return self.status, json.dumps({"error": str(self)}).encode(), \
            {"Content-Type": "application/json"}


class DetailError(InferError):
    """FastAPI's answer to a body it cannot read or validate (KServe,
    MLServer): {"detail": ...}, 422 unless said otherwise."""

    def __init__(self, detail, status=422):
        super().__init__(str(detail), status)
        self.detail = detail

    def answer(self):
        return self.status, json.dumps({"detail": self.detail}).encode(), \
            {"Content-Type": "application/json"}


class PlainError(InferError):
    """Starlette's answer to an exception nobody handled."""

    def __init__(self, status=500, text="Internal Server Error"):
        super().__init__(text, status)

    def answer(self):
        return self.status, str(self).encode(), \
            {"Content-Type": "text/plain; charset=utf-8"}


def json_pos(body, pos):
    """orjson's and json's way of saying where: line, column, char."""
    line = body.count(b"\n", 0, pos) + 1
    col = pos - (body.rfind(b"\n", 0, pos) + 1) + 1
    return "line %d column %d (char %d)" % (line, col, pos)


NONFINITE = re.compile(rb'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)')


def orjson_loads(body):
    """MLServer reads bodies with orjson: no NaN, no Infinity, nothing
    after the document.  The error as FastAPI reports it."""
    def fail(msg, pos):
        raise DetailError([{"loc": ["body", pos],
                            "msg": "%s: %s" % (msg, json_pos(body, pos)),
                            "type": "value_error.jsondecode"}])
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        fail("str is not valid UTF-8: surrogates not allowed", e.start)
    for m in NONFINITE.finditer(body):
        if m.group(1):
            fail("unexpected character", m.start(1))
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        fail("unexpected content after document" if e.msg == "Extra data"
             else "unexpected character", e.pos)


class Tensor:
    """A tensor as the binary extension carries it: little-endian bytes."""

    def __init__(self, name, datatype, shape, raw):
        self.name, self.datatype, self.shape, self.raw = (
            name, datatype, list(shape), raw)

    def count(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def values(self):
        return decode(self.datatype, self.raw, self.count())


def decode(datatype, raw, count):
    fmt, size = DTYPES[datatype]
    if datatype == "BYTES":
        out, pos = [], 0
        while pos < len(raw):
            (n,) = struct.unpack_from("<I", raw, pos)
            out.append(raw[pos + 4:pos + 4 + n])
            pos += 4 + n
        return out
    if datatype == "BF16":
        return [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0]
                for i in range(0, len(raw), 2)]
    return list(struct.unpack("<%d%s" % (count, fmt), raw))


def bf16_pack(x):
    """BF16 bytes of a float: FP32 first, then round to nearest even."""
    (u,) = struct.unpack("<I", struct.pack("<f", x))
    if x != x:
        return struct.pack("<H", 0x7fc0)
    return struct.pack("<H", (u + 0x7fff + ((u >> 16) & 1)) >> 16)


def encode_json_values(name, datatype, values, numpy_based=False):
    """JSON data to tensor bytes, with Triton's checks.  numpy_based:
    FP16 numbers are read, as MLServer's numpy codec reads them; BF16 is
    not a numpy type, and fails there."""
    fmt, size = DTYPES[datatype]
    if datatype == "BF16" and numpy_based:
        raise InferError("builtins.KeyError: 'BF16'", 500)
    if datatype in ("FP16", "BF16") and not numpy_based:
        raise InferError("receiving %s data via JSON is not supported. "
                         "Please use the binary data format for input %s"
                         % (datatype, name))
    out = bytearray()
    for v in values:
        if datatype == "BYTES":
            if not isinstance(v, str):
                raise InferError("Unable to parse JSON bytes array: attempt "
                                 "to access JSON non-string as string", 500)
            b = v.encode("utf-8", "surrogatepass")
            out += struct.pack("<I", len(b)) + b
        elif datatype == "BOOL":
            if not isinstance(v, bool):
                raise InferError("Unable to parse 'data': attempt to access "
                                 "JSON non-boolean as boolean", 500)
            out.append(1 if v else 0)
        elif datatype in INTS:
            if isinstance(v, bool) or not isinstance(v, int):
                raise InferError("Unable to parse 'data': attempt to access "
                                 "JSON non-signed-integer as signed-integer",
                                 500)
            # Triton does not range-check: the value wraps
            out += (v & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
        else:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise InferError("Unable to parse 'data': attempt to access "
                                 "JSON non-number as double", 500)
            out += bf16_pack(v) if datatype == "BF16" else \
                struct.pack("<" + fmt, v)
    return bytes(out)


def flatten(data, out):
    # Triton flattens any nesting
    if isinstance(data, list):
        for d in data:
            flatten(d, out)
    else:
        out.append(data)
    return out


def bytes_chunk_count(raw):
    pos, n = 0, 0
    while pos < len(raw):
        if pos + 4 > len(raw):
            return -1
        (m,) = struct.unpack_from("<I", raw, pos)
        pos += 4 + m
        n += 1
    return n if pos == len(raw) else -1


# ---------------------------------------------------------------- models


class Model:
    """inputs/outputs: lists of (name, datatype, dims); None: any."""

    inputs = None
    outputs = None

    def metadata(self, name):
        def meta(spec):
            return [{"name": n, "datatype": d, "shape": s}
                    for n, d, s in (spec or [])]
        return {"name": name, "versions": ["1"], "platform": "python",
                "inputs": meta(self.inputs), "outputs": meta(self.outputs)}

    def check_inputs(self, model, tensors):
        if self.inputs is None:
            return
        by_name = {t.name: t for t in tensors}
        for n, dt, dims in self.inputs:
            t = by_name.get(n)
            if t is None:
                raise InferError("expected %d inputs but got %d inputs for "
                                 "model '%s'" % (len(self.inputs),
                                                 len(tensors), model))
            if t.datatype != dt:
                raise InferError("inference input '%s' data-type is '%s', "
                                 "but model '%s' expects '%s'"
                                 % (n, t.datatype, model, dt))
            if len(dims) != len(t.shape) or any(
                    d != -1 and d != s for d, s in zip(dims, t.shape)):
                raise InferError("unexpected shape for input '%s' for model "
                                 "'%s'. Expected %s, got %s"
                                 % (n, model, dims, t.shape))
        for t in tensors:
            if t.name not in by_name or t.name not in [i[0] for i in
                                                       self.inputs]:
                raise InferError("unexpected inference input '%s' for "
                                 "model '%s'" % (t.name, model))


class Simple(Model):
    """Triton's 'simple': OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = difference."""

    inputs = [("INPUT0", "INT32", [1, 16]), ("INPUT1", "INT32", [1, 16])]
    outputs = [("OUTPUT0", "INT32", [1, 16]), ("OUTPUT1", "INT32", [1, 16])]

    def run(self, tensors):
        t = {x.name: x.values() for x in tensors}
        wrap = lambda v: ((v + 2 ** 31) % 2 ** 32) - 2 ** 31
        s = [wrap(a + b) for a, b in zip(t["INPUT0"], t["INPUT1"])]
        d = [wrap(a - b) for a, b in zip(t["INPUT0"], t["INPUT1"])]
        return [Tensor("OUTPUT0", "INT32", [1, 16], struct.pack("<16i", *s)),
                Tensor("OUTPUT1", "INT32", [1, 16], struct.pack("<16i", *d))]


class Identity(Model):
    """Each input back as an output: INPUTn -> OUTPUTn, else same name."""

    def __init__(self, inputs=None):
        if inputs:
            self.inputs = inputs
            self.outputs = [(n.replace("INPUT", "OUTPUT", 1), d, s)
                            for n, d, s in inputs]

    def run(self, tensors):
        return [Tensor(t.name.replace("INPUT", "OUTPUT", 1)
                       if t.name.startswith("INPUT") else t.name,
                       t.datatype, t.shape, t.raw) for t in tensors]


class Fail(Model):
    """A model whose code fails: each family answers it its own way."""

    def run(self, tensors):
        raise ModelFailed("the model failed")


class ModelFailed(Exception):
    pass


MODELS = {
    "fail": Fail(),
    "simple": Simple(),
    "identity": Identity(),
    "identity_fp32": Identity([("INPUT0", "FP32", [-1])]),
    "identity_bytes": Identity([("INPUT0", "BYTES", [1])]),
}


# --------------------------------------------------------------- server


class Runtime:
    def __init__(self, family):
        self.family = "mlserver" if family == "jsononly" else family

    def parse_request(self, model_name, model, headers, body):
        """Request bytes to (header JSON, tensors, raw?)."""
        ihcl = headers.get(IHCL)
        ctype = (headers.get("Content-Type") or "").split(";")[0].strip()
        json_type = ctype in ("", "application/json") or \
            ctype.endswith("+json")

        if self.family == "mlserver":
            # no binary extension: the body is JSON, or FastAPI says why
            if not json_type:
                raise DetailError([{"loc": ["body"],
                                    "msg": "value is not a valid dict",
                                    "type": "type_error.dict"}])
            req = orjson_loads(body)
            if not isinstance(req, dict) or "inputs" not in req:
                raise DetailError([{"loc": ["body", "inputs"],
                                    "msg": "field required",
                                    "type": "value_error.missing"}])
            ihcl = None

        if ihcl is not None and self.family == "kserve" and json_type:
            # FastAPI reads such a body as JSON, and fails on the binary
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError:
                raise DetailError("There was an error parsing the body", 400)
            try:
                json.loads(text)
            except json.JSONDecodeError as e:
                raise DetailError([{"type": "json_invalid",
                                    "loc": ["body", e.pos],
                                    "msg": "JSON decode error", "input": {},
                                    "ctx": {"error": e.msg}}])

        if ihcl is not None:
            try:
                hlen = int(ihcl.strip())
            except ValueError:
                raise InferError("Unable to parse %s, got: %s" % (IHCL, ihcl))
            if hlen < 0 or hlen > len(body):
                raise InferError("inference header size should be in range "
                                 "(0, %d), got: %d" % (len(body), hlen))
        else:
            hlen = len(body)

        if hlen == 0:
            if self.family != "triton":
                raise InferError("Unrecognized request format")
            return {}, self.raw_input(model_name, model, body), True

        try:
            req = json.loads(body[:hlen].decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise InferError("failed to parse the request JSON buffer: %s"
                             % e, 500)
        if not isinstance(req, dict):
            raise InferError("failed to parse the request JSON buffer: not "
                             "an object", 500)

        if self.family == "kserve" and "inputs" not in req:
            raise DetailError([{"type": "missing", "loc": ["body", "inputs"],
                                "msg": "Field required", "input": req}])

        if self.family == "triton":
            self.triton_nulls(req)

        binary = memoryview(body)[hlen:]
        pos = 0
        tensors = []
        names = set()
        for inp in req.get("inputs") or []:
            params = inp.get("parameters") or {}
            name, dt = inp.get("name"), inp.get("datatype")
            shape = inp.get("shape")
            if not isinstance(name, str) or not isinstance(dt, str) or \
                    not isinstance(shape, list):
                raise InferError("Unable to parse 'name', 'datatype' or "
                                 "'shape'", 500)
            if any(not isinstance(d, int) or isinstance(d, bool) or d < 0
                   for d in shape):
                raise InferError("Unable to parse 'shape': attempt to access "
                                 "JSON non-unsigned-integer as "
                                 "unsigned-integer", 500)
            if name in names:
                raise InferError("input '%s' already exists in request" % name)
            names.add(name)
            if dt not in DTYPES:
                raise InferError("invalid datatype for input %s" % name)
            fields = [f for f in ("data", "binary_data_size",
                                  "shared_memory_region")
                      if (inp if f == "data" else params).get(f) is not None]
            if len(fields) != 1:
                raise InferError("Input must set only one of the following "
                                 "fields: 'data', 'binary_data_size' in "
                                 "'parameters', 'shared_memory_region' in "
                                 "'parameters'. But set %s" % fields)
            t = Tensor(name, dt, shape, b"")
            if fields[0] == "shared_memory_region":
                raise InferError("shared memory is not supported here")
            if fields[0] == "binary_data_size":
                size = params["binary_data_size"]
                if pos + size > len(binary):
                    raise InferError("unexpected size for input '%s', "
                                     "expecting %d additional bytes for "
                                     "model '%s'" % (name, pos + size -
                                                     len(binary), model_name))
                t.raw = bytes(binary[pos:pos + size])
                pos += size
            else:
                values = flatten(inp["data"], [])
                if len(values) != t.count():
                    raise InferError("Unable to parse 'data': Shape does not "
                                     "match true shape of 'data' field", 500)
                t.raw = encode_json_values(name, dt, values,
                                           self.family == "mlserver")
            self.check_size(model_name, t)
            tensors.append(t)

        if pos != len(binary):
            raise InferError("unexpected additional input data for model "
                             "'%s'" % model_name)
        return req, tensors, False

    @staticmethod
    def triton_nulls(req):
        """Triton's JSON reader refuses a null where it wants a value."""
        def kind(v):
            return {dict: "object", list: "array", str: "string"}[v]
        checks = [(req, "id", str), (req, "parameters", dict),
                  (req, "outputs", list)]
        for inp in req.get("inputs") or []:
            if isinstance(inp, dict):
                checks.append((inp, "parameters", dict))
        for out in req.get("outputs") or []:
            if isinstance(out, dict):
                checks.append((out, "parameters", dict))
        for obj, key, want in checks:
            if key in obj and obj[key] is None:
                raise InferError("Unable to parse '%s': attempt to access "
                                 "JSON non-%s as %s" % (key, kind(want),
                                                        kind(want)))

    def check_size(self, model_name, t):
        size = DTYPES[t.datatype][1]
        if size:
            if len(t.raw) != t.count() * size:
                raise InferError("input byte size mismatch for input '%s' "
                                 "for model '%s'. Expected %d, got %d"
                                 % (t.name, model_name, t.count() * size,
                                    len(t.raw)))
        elif bytes_chunk_count(t.raw) != t.count():
            raise InferError("expected %d string elements for inference "
                             "input '%s'" % (t.count(), t.name))

    def raw_input(self, model_name, model, body):
        """IHCL 0: the body is the one input the model declares."""
        if not model.inputs or len(model.inputs) != 1:
            raise InferError("Raw request must only have 1 input (found 1) "
                             "to be deduced but got %d inputs in '%s' model "
                             "configuration" % (len(model.inputs or []),
                                                model_name))
        name, dt, dims = model.inputs[0]
        if dt == "BYTES":
            if dims != [1]:
                raise InferError("For BYTE datatype raw input '%s', the "
                                 "model must have input shape [1]" % name)
            return [Tensor(name, dt, [1],
                           struct.pack("<I", len(body)) + body)]
        size = DTYPES[dt][1]
        known = 1
        for d in dims:
            if d != -1:
                known *= d
        shape = list(dims)
        if dims.count(-1) > 1:
            raise InferError("The shape of the raw input '%s' can not be "
                             "deduced because there are more than one "
                             "variable-sized dimension" % name)
        if -1 in dims:
            if len(body) % (known * size):
                raise InferError("raw input '%s' of %d bytes does not fit "
                                 "its shape" % (name, len(body)))
            shape[dims.index(-1)] = len(body) // (known * size)
        t = Tensor(name, dt, shape, body)
        self.check_size(model_name, t)
        return [t]

    def no_json_outputs(self):
        """Datatypes this family cannot write as JSON: Triton refuses FP16
        and BF16; OVMS's REST writer knows only FP32, FP64 and integers."""
        if self.family == "mlserver":
            return ()
        if self.family == "openvino":
            return ("FP16", "BF16", "BOOL", "BYTES")
        return ("FP16", "BF16")

    def wants_binary(self, req, raw):
        """Per output name: binary? (None: outputs not listed)."""
        if raw:
            return None, True
        params = req.get("parameters") or {}
        default = bool(params.get("binary_data_output", False))
        listed = req.get("outputs")
        if self.family == "mlserver":
            # MLServer answers what the model returns, as JSON
            return None, False
        if not listed:
            return None, (default if self.family != "openvino" else False)
        wish = {}
        for o in listed:
            p = o.get("parameters") or {}
            if self.family == "openvino":
                wish[o["name"]] = bool(p.get("binary_data", default))
            else:
                wish[o["name"]] = bool(p.get("binary_data", False))
        return wish, default

    def infer(self, model_name, headers, body):
        model = MODELS.get(model_name)
        if model is None:
            raise InferError("Request for unknown model: '%s' is not found"
                             % model_name, 404)

        req, tensors, raw = self.parse_request(model_name, model, headers,
                                               body)
        model.check_inputs(model_name, tensors)
        try:
            results = {t.name: t for t in model.run(tensors)}
        except ModelFailed as e:
            if self.family == "mlserver":
                # parallel_workers 0, debug off: Starlette's own answer
                raise PlainError()
            if self.family == "kserve":
                raise InferError("ModelFailed : %s" % e, 500)
            raise InferError(str(e), 500)

        wish, default = self.wants_binary(req, raw)
        if wish is not None:
            for n in wish:
                if n not in results:
                    raise InferError("unexpected inference output '%s' for "
                                     "model '%s'" % (n, model_name))
            chosen = [(results[n], wish[n]) for n in wish]
        else:
            chosen = [(t, default) for t in results.values()]

        if self.family == "kserve":
            return self.kserve_answer(model_name, req, chosen)
        if self.family == "mlserver":
            return self.mlserver_answer(model_name, req, chosen)

        resp = {}
        if req.get("id"):
            resp["id"] = req["id"]
        resp["model_name"] = model_name
        resp["model_version"] = "1"
        outputs, chunks = [], []
        for t, binary in chosen:
            o = {"name": t.name, "datatype": t.datatype, "shape": t.shape}
            if binary:
                o["parameters"] = {"binary_data_size": len(t.raw)}
                chunks.append(t.raw)
            else:
                o["data"] = self.json_data(t)
            outputs.append(o)
        resp["outputs"] = outputs

        header = json.dumps(resp, separators=(",", ":")).encode()
        if any(len(c) for c in chunks):
            # the families label binary answers differently
            if self.family == "openvino":
                headers = {"Content-Type": "application/json",
                           IHCL.lower(): str(len(header))}
            else:
                headers = {"Content-Type": "application/octet-stream",
                           IHCL: str(len(header))}
            return header + b"".join(chunks), headers
        return header, {"Content-Type": "application/json"}

    def json_data(self, t):
        if t.datatype in self.no_json_outputs():
            raise InferError("sending %s data via JSON is not supported. "
                             "Please use the binary data format for output"
                             % t.datatype)
        vals = t.values()
        if t.datatype == "BYTES":
            vals = [v.decode("utf-8", "replace") for v in vals]
        return vals

    def kserve_answer(self, model_name, req, chosen):
        """KServe 0.15: a JSON answer is its pydantic model, every member
        without a value written as null, NaN and infinities as null
        (orjson); a binary answer's header is the plain dict, without
        those nulls, and goes with a lower-case IHCL, no Content-Type,
        chunked."""
        rid = req.get("id") or str(uuid.uuid4())
        binary = any(b for _, b in chosen)
        outputs, chunks = [], []
        for t, b in chosen:
            o = {"name": t.name, "shape": t.shape, "datatype": t.datatype}
            if b:
                o["parameters"] = {"binary_data_size": len(t.raw)}
                chunks.append(t.raw)
            else:
                if not binary:
                    o["parameters"] = None
                o["data"] = [None if isinstance(v, float)
                             and not math.isfinite(v) else v
                             for v in self.json_data(t)]
            outputs.append(o)
        if not binary:
            resp = {"model_name": model_name, "model_version": None,
                    "id": rid, "parameters": None, "outputs": outputs}
            return json.dumps(resp, separators=(",", ":")).encode(), \
                {"Content-Type": "application/json"}
        resp = {"id": rid, "model_name": model_name, "model_version": None,
                "outputs": outputs}
        header = json.dumps(resp, separators=(",", ":")).encode()
        return header + b"".join(chunks), \
            {IHCL.lower(): str(len(header)), "Transfer-Encoding": "chunked"}

    def mlserver_answer(self, model_name, req, chosen):
        """MLServer 1.3: nulls left out, the numpy codec's parameters on
        each output, an id always; Starlette cannot write NaN: 500."""
        outputs = []
        for t, _ in chosen:
            vals = self.json_data(t)
            if any(isinstance(v, float) and not math.isfinite(v)
                   for v in vals):
                raise PlainError()
            outputs.append({"name": t.name, "shape": t.shape,
                            "datatype": t.datatype,
                            "parameters": {"content_type": "np"},
                            "data": vals})
        resp = {"model_name": model_name,
                "id": req.get("id") or str(uuid.uuid4()),
                "parameters": {}, "outputs": outputs}
        return json.dumps(resp, separators=(",", ":"),
                          allow_nan=False).encode(), \
            {"Content-Type": "application/json"}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "oip-runtime"

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("runtime: " + fmt % args + "\n")

    def reply(self, status, body=b"", headers=None):
        headers = dict(headers or {})
        chunked = headers.get("Transfer-Encoding") == "chunked"
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        if not chunked:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command == "HEAD":
            return
        if not chunked:
            self.wfile.write(body)
            return
        # uvicorn sends what it is given in pieces: two, then the end
        half = len(body) // 2
        for piece in (body[:half], body[half:]):
            if piece:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        self.wfile.write(b"0\r\n\r\n")

    def error(self, status, message):
        self.answer(InferError(message, status))

    def answer(self, e):
        status, body, headers = e.answer()
        self.reply(status, body, headers)

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return bytes(body)
                body += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def route(self):
        """(model or "server" or None, what follows, version or None)"""
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        if parts[:1] != ["v2"]:
            return None, None, None
        rest = parts[1:]
        if rest in ([], ["health", "live"], ["health", "ready"]):
            return "server", rest, None
        if len(rest) >= 2 and rest[0] == "models":
            model, tail, version = rest[1], rest[2:], None
            if tail[:1] == ["versions"] and len(tail) >= 2:
                version, tail = tail[1], tail[2:]
            return model, tail, version
        return None, None, None

    def check_model(self, model, version):
        """The family's answer to an unknown model or a version."""
        family = self.server.runtime.family
        if family == "kserve" and version is not None:
            # KServe: "TODO: support model_version", before all else
            raise InferError("Model versioning not supported yet.", 501)
        if model not in MODELS:
            if family == "kserve":
                raise InferError("Model with name %s does not exist."
                                 % model, 404)
            if family == "mlserver":
                raise InferError("Model %s not found" % model, 404)
            raise InferError("Request for unknown model: '%s' is not found"
                             % model, 404)
        if family == "mlserver" and version not in (None, "1"):
            raise InferError("Model %s with version %s not found"
                             % (model, version), 404)

    SERVER = {
        "triton": {"name": "triton", "version": "2.49.0",
                   "extensions": ["classification", "sequence",
                                  "model_repository", "binary_tensor_data",
                                  "statistics"]},
        "kserve": {"name": "kserve", "version": "0.15.2",
                   "extensions": ["model_repository_extension"]},
        "openvino": {"name": "OpenVINO Model Server", "version": "2024.4"},
        "mlserver": {"name": "mlserver", "version": "1.3.5",
                     "extensions": []},
    }

    def do_GET(self):
        family = self.server.runtime.family
        model, tail, version = self.route()
        if model == "server":
            if tail and family == "kserve":
                # pydantic models: {"live": true}, {"ready": true}
                return self.reply(200, json.dumps(
                    {tail[1]: True}).encode(),
                    {"Content-Type": "application/json"})
            if tail:
                # MLServer, Triton, OVMS: an empty 200
                return self.reply(200)
            return self.reply(200, json.dumps(self.SERVER[family]).encode(),
                              {"Content-Type": "application/json"})
        if model is None:
            return self.error(404, "Not Found")
        try:
            self.check_model(model, version)
        except InferError as e:
            return self.answer(e)
        if tail == ["ready"]:
            if family == "kserve":
                return self.reply(200, json.dumps(
                    {"name": model, "ready": True}).encode(),
                    {"Content-Type": "application/json"})
            return self.reply(200)
        if tail == []:
            return self.reply(200, json.dumps(
                MODELS[model].metadata(model)).encode(),
                {"Content-Type": "application/json"})
        return self.error(404, "Not Found")

    do_HEAD = do_GET

    def do_POST(self):
        body = self.read_body()
        model, tail, version = self.route()
        if model in (None, "server") or tail != ["infer"]:
            return self.error(404, "Not Found")

        enc = self.headers.get("Content-Encoding", "")
        try:
            self.check_model(model, version)
            if enc in ("gzip", "deflate"):
                if not body:
                    raise InferError("nothing to be decompressed")
                body = zlib.decompress(body, 47)    # zlib or gzip wrapper
            elif enc not in ("", "identity"):
                return self.error(501, "Unsupported compression type")
            out, headers = self.server.runtime.infer(model, self.headers,
                                                     body)
        except InferError as e:
            return self.answer(e)
        except zlib.error as e:
            return self.error(400, "failed to decompress: %s" % e)

        accept = self.headers.get("Accept-Encoding", "")
        if "gzip" in accept:
            out = gzip.compress(out)
            headers["Content-Encoding"] = "gzip"
        elif "deflate" in accept:
            out = zlib.compress(out)
            headers["Content-Encoding"] = "deflate"
        self.reply(200, out, headers)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8001)
    ap.add_argument("--family", default="triton",
                    choices=["triton", "kserve", "openvino", "mlserver",
                             "jsononly"])
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    server.runtime = Runtime(args.family)
    server.verbose = args.verbose

    def stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    print("oip-runtime (%s) listening on %s:%d"
          % (args.family, args.host, server.server_address[1]), flush=True)
    server.serve_forever()
    server.server_close()


if __name__ == "__main__":
    main()
