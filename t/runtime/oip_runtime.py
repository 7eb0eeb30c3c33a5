#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""An example Open Inference Protocol runtime, for the demo and the tests.

It speaks KServe v2 / Triton HTTP the way Triton's HTTP frontend does:
JSON and binary tensor data (Inference-Header-Content-Length), raw binary
requests for one-input models, {"error": ...} bodies, gzip/deflate bodies,
compressed responses, model metadata and health endpoints.

    oip_runtime.py --port 8001 [--family triton|kserve|openvino|jsononly]

--family changes how outputs are answered, to stand in for the runtimes the
gateway is deployed in front of:
  triton    a listed output is binary if its binary_data is true; without
            an outputs list, binary_data_output decides for all of them
  kserve    as Triton (kserve#5907 makes listed outputs ignore
            binary_data_output), no raw binary, id always answered,
            binary answers with a lower-case IHCL and no Content-Type;
            a binary body sent without a non-JSON Content-Type is read as
            JSON and refused with 422, as FastAPI does
  openvino  binary_data_output is the default of listed outputs only;
            with no outputs list everything is JSON; no raw binary;
            binary answers say Content-Type: application/json
  jsononly  no binary extension at all (MLServer): binary bodies are
            refused with 422 and every output is JSON; FP16 and BF16
            travel as JSON numbers, as numpy-based runtimes allow

Standard library only.
"""

import argparse
import gzip
import json
import signal
import struct
import sys
import threading
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
    def __init__(self, message, status=400):
        super().__init__(message)
        self.status = status


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


def encode_json_values(name, datatype, values, half_as_json=False):
    """JSON data to tensor bytes, with Triton's checks.  half_as_json:
    accept FP16/BF16 numbers, as numpy-based runtimes (MLServer) do."""
    fmt, size = DTYPES[datatype]
    if datatype in ("FP16", "BF16") and not half_as_json:
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


MODELS = {
    "simple": Simple(),
    "identity": Identity(),
    "identity_fp32": Identity([("INPUT0", "FP32", [-1])]),
    "identity_bytes": Identity([("INPUT0", "BYTES", [1])]),
}


# --------------------------------------------------------------- server


class Runtime:
    def __init__(self, family):
        self.family = family

    def parse_request(self, model_name, model, headers, body):
        """Request bytes to (header JSON, tensors, raw?)."""
        ihcl = headers.get(IHCL)

        if ihcl is not None and self.family == "jsononly":
            raise InferError("request body is not JSON: this runtime has no "
                             "binary tensor data extension", 422)

        ctype = (headers.get("Content-Type") or "").split(";")[0].strip()
        if ihcl is not None and self.family == "kserve" and \
                ctype in ("", "application/json"):
            # FastAPI reads such a body as JSON, and fails on the binary
            raise InferError("request body is not valid JSON", 422)

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
                                           self.family == "jsononly")
            self.check_size(model_name, t)
            tensors.append(t)

        if pos != len(binary):
            raise InferError("unexpected additional input data for model "
                             "'%s'" % model_name)
        return req, tensors, False

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
        if self.family == "jsononly":
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
        if self.family == "jsononly":
            return ({o["name"]: False for o in listed} if listed else None,
                    False)
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
        results = {t.name: t for t in model.run(tensors)}

        wish, default = self.wants_binary(req, raw)
        if wish is not None:
            for n in wish:
                if n not in results:
                    raise InferError("unexpected inference output '%s' for "
                                     "model '%s'" % (n, model_name))
            chosen = [(results[n], wish[n]) for n in wish]
        else:
            chosen = [(t, default) for t in results.values()]

        resp = {}
        if self.family == "kserve" or req.get("id"):
            resp["id"] = req.get("id") or "kserve-generated-id"
        resp["model_name"] = model_name
        resp["model_version"] = "1"
        outputs, chunks = [], []
        for t, binary in chosen:
            o = {"name": t.name, "datatype": t.datatype, "shape": t.shape}
            if binary:
                o["parameters"] = {"binary_data_size": len(t.raw)}
                chunks.append(t.raw)
            else:
                if t.datatype in self.no_json_outputs():
                    raise InferError("sending %s data via JSON is not "
                                     "supported. Please use the binary data "
                                     "format for output" % t.datatype)
                vals = t.values()
                if t.datatype == "BYTES":
                    vals = [v.decode("utf-8", "replace") for v in vals]
                o["data"] = vals
            outputs.append(o)
        resp["outputs"] = outputs

        header = json.dumps(resp, separators=(",", ":")).encode()
        if any(len(c) for c in chunks):
            # the families label binary answers differently
            if self.family == "openvino":
                headers = {"Content-Type": "application/json",
                           IHCL.lower(): str(len(header))}
            elif self.family == "kserve":
                headers = {IHCL.lower(): str(len(header))}
            else:
                headers = {"Content-Type": "application/octet-stream",
                           IHCL: str(len(header))}
            return header + b"".join(chunks), headers
        return header, {"Content-Type": "application/json"}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "oip-runtime"

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("runtime: " + fmt % args + "\n")

    def reply(self, status, body=b"", headers=None):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, status, message):
        self.reply(status, json.dumps({"error": message}).encode(),
                   {"Content-Type": "application/json"})

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
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        if parts[:1] != ["v2"]:
            return None, None
        rest = parts[1:]
        if rest in ([], ["health", "live"], ["health", "ready"]):
            return "server", rest
        if len(rest) >= 2 and rest[0] == "models":
            model, tail = rest[1], rest[2:]
            if tail[:1] == ["versions"] and len(tail) >= 2:
                tail = tail[2:]
            return model, tail
        return None, None

    def do_GET(self):
        model, tail = self.route()
        if model == "server":
            if tail:
                return self.reply(200)
            return self.reply(200, json.dumps({
                "name": "oip-runtime", "version": "1",
                "extensions": [] if self.server.runtime.family == "jsononly"
                else ["binary_tensor_data"]}).encode(),
                {"Content-Type": "application/json"})
        if model is None:
            return self.error(404, "Not Found")
        if model not in MODELS:
            return self.error(404, "Request for unknown model: '%s' is not "
                              "found" % model)
        if tail == ["ready"]:
            return self.reply(200)
        if tail == []:
            return self.reply(200, json.dumps(
                MODELS[model].metadata(model)).encode(),
                {"Content-Type": "application/json"})
        return self.error(404, "Not Found")

    do_HEAD = do_GET

    def do_POST(self):
        body = self.read_body()
        model, tail = self.route()
        if model in (None, "server") or tail != ["infer"]:
            return self.error(404, "Not Found")

        enc = self.headers.get("Content-Encoding", "")
        try:
            if enc in ("gzip", "deflate"):
                if not body:
                    raise InferError("nothing to be decompressed")
                body = zlib.decompress(body, 47)    # zlib or gzip wrapper
            elif enc not in ("", "identity"):
                return self.error(501, "Unsupported compression type")
            out, headers = self.server.runtime.infer(model, self.headers,
                                                     body)
        except InferError as e:
            return self.error(e.status, str(e))
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
                    choices=["triton", "kserve", "openvino", "jsononly"])
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
