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
                   [--triton-version 2.49.0]
                   [--sagemaker-port P] [--vertex-port P]

--sagemaker-port and --vertex-port also serve Triton's SageMaker
(POST /invocations, /models/{m}/invoke; GET /ping) and Vertex AI (POST
/predict, X-Vertex-Ai-Triton-Redirect: v2/models/{m}/infer; GET /health)
frontends, which carry the JSON's length in the Content-Type
(FrontendHandler says how).

--family imitates the runtimes the gateway is deployed in front of, habits
included, as their sources show them (docs/upstreams.md has the list):
  triton    a listed output is binary if its binary_data is true; without
            an outputs list, binary_data_output decides for all of them;
            a null where an object, array or string belongs is refused;
            generate and generate_stream as Triton maps them (counted in
            /_test/counts "generate")
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
            empty 200s ("jsononly" is an alias, the name it had);
            infer_stream and generate_stream answer server-sent events
            (/_test/streaming)

Model metadata (GET /v2/models/{m}[/versions/{v}]), compact JSON, as each
family writes it (docs/upstreams.md, "Model metadata", has the sources):
  triton    {name, versions, platform, inputs, outputs}: versions the one
            asked for, else the ready ones (["1"]); platform the config's,
            else its backend ("python"); no parameters anywhere.  Unknown:
            404 "Request for unknown model: 'm' is not found", or "...: 'm'
            version 2 is not found"; --triton-version below 2.42 answers
            these and every other error but its routes' with 400, as
            Triton did before server#6713; a version that is not digits
            is 404 "Not Found" (no route takes it)
  kserve    "versions": null, "platform": "", tensors {name, datatype,
            shape}; a model that declares no types publishes [] and [];
            versioned paths 501 before anything else; unknown: 404 "Model
            with name m does not exist."
  openvino  "versions": every ready one (["1"]) whichever was asked,
            "platform": "OpenVINO", tensors in name order (a std::map);
            unknown: 404 "Model with requested name is not found", "Model
            with requested version is not found"; a version that is not
            digits is 400 "Invalid request URL"
  mlserver  "versions": [] (model-settings.json sets none, although the
            models answer as version "1"), "platform": "", tensors
            without parameters, "parameters": {} at the top; unknown: 404
            "Model m not found", "Model m with version v not found"
The models without a declared signature (identity, fail) publish "inputs":
[] and "outputs": [] in every family, and still take any input.

Test hooks, under /_test/, a path no runtime has (JSON in and out):
  GET    /_test/counts           {"meta": {"m" or "m/v": n}, "infer": {"m": n}}
                                 metadata GETs as asked, infer POSTs
  POST   /_test/reset            counters, test models and faults cleared
  PUT    /_test/models/{m}       {"inputs": [{"name", "datatype", "shape"}],
                                 "outputs": [...]}: an Identity that
                                 publishes and enforces that signature
  DELETE /_test/models/{m}       m is then unknown (reset brings back a
                                 built-in one)
  PUT    /_test/meta_fault/{m}   {"mode": M, "seconds": S}: m's metadata
                                 misbehaves, infer does not: slow (S
                                 seconds, then the answer), garbage (200
                                 JSON that is not), html500 (a proxy's
                                 page), huge (200, valid, ~10 MB; "bytes"
                                 sets the size), wrong (200, valid JSON of
                                 wrong types), none (cleared)
  PUT    /_test/service/{m}      {"seconds": S, "instances": N}: m runs on
                                 N instances (default 1), each infer request
                                 holding one S seconds before it is
                                 answered; at most N at once, the others
                                 wait inside the runtime, first come first
                                 served, as in Triton's queue.  S >= 0, N
                                 >= 1; "max_queue": Q (Triton's
                                 max_queue_size; 0, the default, none):
                                 the Q+1th waiting is refused as Triton
                                 refuses it (503 "[request id: ID]
                                 Exceeds maximum queue size"); only
                                 Triton has such an answer (OVMS, KServe,
                                 MLServer queue without bound), a test
                                 sets it for the triton family only;
                                 {"seconds": 0} or
                                 {"mode": "none"}
                                 (or DELETE) clears it.  Only requests that
                                 are read and valid take an instance
  GET    /_test/highwater        {"m": {"concurrent", "running", "bytes",
                                 "now", "served"}}: per model, the most
                                 infer requests (the SageMaker and Vertex
                                 AI frontends' too) in flight at once (from
                                 the start of do_POST, before the body is
                                 read, to just before the answer's last
                                 byte is written; waiting for an instance
                                 included), the most holding an instance
                                 (without a service: inside the model),
                                 the most tensor bytes in flight (each
                                 request's inputs as parsed, their binary
                                 size, BYTES as serialized, from the parse
                                 to the same end), the requests in flight
                                 now, those answered (any status)
  POST   /_test/highwater/reset  the marks back to what is in flight now,
                                 served to 0 (POST /_test/reset does it too,
                                 and clears the services)
  PUT    /_test/sequences/{m}    {"idle": S}: m is stateful, on Triton's
                                 sequence batcher (sequence_batch_scheduler
                                 .cc, sequence_utils.h): a request needs a
                                 sequence_id (0 or "": 400 "inference
                                 request to model 'm' must specify a
                                 non-zero or non-empty correlation ID");
                                 one without sequence_start for a sequence
                                 not active is refused (400 "inference
                                 request for sequence N to model 'm' must
                                 specify the START flag on the first
                                 request of the sequence"); a start (again)
                                 begins it, an end ends it after the
                                 answer; each FP32 output is the running
                                 sum of its values over the sequence (an
                                 accumulator); a sequence idle S seconds
                                 (Triton's
                                 max_sequence_idle_microseconds, 1 s by
                                 default) is released silently; integer
                                 and string ids are distinct.  {"idle": 0}
                                 or DELETE: stateless again
  PUT    /_test/streaming/{m}    {"responses": N, "spacing": S,
                                 "fail_after": k} (mlserver): m streams,
                                 MLServer's predict_stream: N answers to
                                 infer_stream and generate_stream, S
                                 seconds before each, each with an output
                                 INDEX (INT32 [1], its number); the
                                 connection closed instead of answer k;
                                 DELETE: one answer again (predict_stream's
                                 fallback)
                                 (the counts' "gone": streams whose
                                 client left before their end)
  GET    /_test/sequence_counts  {"m": {"<id as JSON>": n}}: per model, the
                                 infer requests of each sequence id it
                                 served (a stateful model's refusals not
                                 counted), all of them (POST /_test/reset
                                 clears them)
  GET    /_test/arrivals         {"m": [{"id", "parameters"}]}: per model,
                                 the last 256 valid infer requests in the
                                 order they were read, each with its id
                                 and its request-level parameters as
                                 received (POST /_test/reset clears them)

Standard library only.
"""

import argparse
import collections
import contextlib
import gzip
import json
import math
import re
import select
import signal
import socket
import struct
import sys
import threading
import time
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


class RouteError(InferError):
    """An error of the server's routes, not of a model: Triton before 2.42
    answered these with their own status, the others with 400."""

    def __init__(self, status, message):
        super().__init__(message, status)


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

    def signature(self):
        """(inputs, outputs) as metadata lists them.

        A model that declares nothing (inputs None: it takes any input)
        publishes [] and [], in every family, which is what each of them
        publishes for a model that declares no signature: Triton always
        has a config, and a Python-backend model whose config lists no
        input or output answers "inputs": [], "outputs": []; KServe's
        Model.get_input_types() and get_output_types() return [] unless
        overridden; MLServer's ModelSettings default both to []. OVMS has
        no such model (an OpenVINO model always has its signature; a
        MediaPipe graph lists its streams, "datatype": "INVALID",
        "shape": []): [] is the nearest.  Beware: to a real Triton, []
        means "takes no input" and it refuses every one; here it means
        "declares nothing"."""
        def meta(spec):
            return [{"name": n, "datatype": d, "shape": list(s)}
                    for n, d, s in (spec or [])]
        return meta(self.inputs), meta(self.outputs)

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


class Declared(Identity):
    """A model a test defined (PUT /_test/models/{name}): Identity's
    behaviour, and exactly the signature it was given, published and
    enforced (no inputs declared: it takes none)."""

    def __init__(self, inputs, outputs):
        self.inputs = inputs
        self.outputs = outputs


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


class Service:
    """A model's instances (PUT /_test/service/{m}): at most `instances`
    requests run at once, each for `seconds`; the others wait for one
    inside the runtime, first come first served, as in Triton's
    scheduler queue.  (A threading.Semaphore would let a newcomer take
    an instance before the waiter it was released to wakes up: here a
    release hands the instance to the first waiter.)"""

    def __init__(self, seconds, instances, max_queue=0):
        self.seconds, self.free = seconds, instances
        self.max_queue = max_queue
        self.lock = threading.Lock()
        self.waiting = collections.deque()

    def acquire(self):
        with self.lock:
            if self.free and not self.waiting:
                self.free -= 1
                return
            if self.max_queue and len(self.waiting) >= self.max_queue:
                raise QueueFull()
            turn = threading.Event()
            self.waiting.append(turn)
        turn.wait()

    def release(self):
        with self.lock:
            if self.waiting:
                self.waiting.popleft().set()
            else:
                self.free += 1


class QueueFull(Exception):
    """A service's queue at its max_queue (Triton's max_queue_size)."""


class Flight:
    """One infer request's part in its model's in-flight counts (GET
    /_test/highwater): from the start of do_POST, before the body is
    read, to end(), just before the answer's last byte is written;
    its tensor bytes from parsed() to the same end."""

    def __init__(self, runtime, model):
        self.runtime, self.bytes, self.ended = runtime, 0, False
        with runtime.lock:
            self.marks = runtime.marks(model)
            self.add("now", "concurrent", 1)

    def add(self, now, high, n):
        """Under the runtime's lock."""
        self.marks[now] += n
        if self.marks[now] > self.marks[high]:
            self.marks[high] = self.marks[now]

    def parsed(self, tensors):
        """The request's inputs as the runtime reads them: their binary
        size (BYTES serialized, each element's 4-byte length included)."""
        with self.runtime.lock:
            if self.ended or self.bytes:
                return
            self.bytes = sum(len(t.raw) for t in tensors)
            self.add("bytes_now", "bytes", self.bytes)

    def running(self, n):
        with self.runtime.lock:
            self.add("running_now", "running", n)

    def end(self):
        with self.runtime.lock:
            if self.ended:
                return
            self.ended = True
            self.add("now", "concurrent", -1)
            self.add("bytes_now", "bytes", -self.bytes)
            self.marks["served"] += 1


def version_tuple(text):
    return tuple(int(x) for x in re.findall(r"\d+", text))


class Runtime:
    def __init__(self, family, triton_version="2.49.0"):
        self.family = "mlserver" if family == "jsononly" else family
        self.triton_version = triton_version
        # Triton answered every error its core reported with 400 until
        # 2.42 (server#6713: HttpCodeFromError, 404 for NOT_FOUND)
        self.legacy_codes = self.family == "triton" and \
            version_tuple(triton_version) < (2, 42)
        # the model table, the tests' faults and counters: one lock, as
        # the server answers each connection in its own thread
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with self.lock:
            self.models = dict(MODELS)
            self.faults = {}
            self.counts = {"meta": {}, "infer": {}, "gone": {},
                           "generate": {}}
            self.services = {}
            self.arrivals = {}
            self.sequence_counts = {}
            self.sequences = {}      # model: {"idle": S, "active": {}}
            self.streaming = {}      # model: {"responses", "spacing", ...}
        self.reset_marks()

    MARKS = ("now", "concurrent", "running_now", "running", "bytes_now",
             "bytes", "served")

    def marks(self, model):
        """model's in-flight counts and high-water marks (under the
        lock): a dict that stays the same while requests hold it."""
        table = self.highwater
        if model not in table:
            table[model] = dict.fromkeys(self.MARKS, 0)
        return table[model]

    def reset_marks(self):
        """High-water marks back to what is in flight now, served to 0;
        a model with nothing in flight is forgotten."""
        with self.lock:
            table = getattr(self, "highwater", {})
            for model in list(table):
                m = table[model]
                if not m["now"]:
                    del table[model]
                    continue
                m["concurrent"] = m["now"]
                m["running"] = m["running_now"]
                m["bytes"] = m["bytes_now"]
                m["served"] = 0
            self.highwater = table

    @contextlib.contextmanager
    def instance(self, name, flight):
        """One of the model's instances while the model runs: with a
        service (PUT /_test/service/{m}), waited for, then held its
        seconds; without, nothing to wait for."""
        with self.lock:
            service = self.services.get(name)
        if service:
            service.acquire()
        try:
            if flight:
                flight.running(1)
            try:
                if service and service.seconds:
                    time.sleep(service.seconds)
                yield
            finally:
                if flight:
                    flight.running(-1)
        finally:
            if service:
                service.release()

    def model(self, name):
        with self.lock:
            return self.models.get(name)

    def sequence(self, name, req):
        """Triton's sequence batcher for a stateful model (PUT
        /_test/sequences/{m}): its id checked, a sequence begun, found,
        ended, or released when idle; refusals in Triton's words.  Its
        state (a dict, for accumulate()), or None for a stateless
        model."""
        with self.lock:
            seq = self.sequences.get(name)
            if seq is None:
                return None
            params = req.get("parameters") or {}
            sid = params.get("sequence_id", 0)
            if sid == 0 or sid == "":
                raise InferError("inference request to model '%s' must "
                                 "specify a non-zero or non-empty "
                                 "correlation ID" % name)
            key = (type(sid).__name__, sid)
            now = time.time()
            active = seq["active"]
            for k in [k for k, st in active.items()
                      if now - st["used"] > seq["idle"]]:
                del active[k]
            if params.get("sequence_start") is True:
                active[key] = {"used": now, "sum": None}
            elif key not in active:
                raise InferError("inference request for sequence %s to "
                                 "model '%s' must specify the START flag "
                                 "on the first request of the sequence"
                                 % (sid, name))
            state = active[key]
            state["used"] = now
            if params.get("sequence_end") is True:
                del active[key]
            return state

    @staticmethod
    def accumulate(state, results):
        """A stateful model's answer: each FP32 output the running sum of
        its values over the sequence (an accumulator, as Triton's
        sequence examples), so that a sequence split between runtimes
        shows in its answers."""
        for name, t in results.items():
            if t.datatype != "FP32":
                continue
            values = t.values()
            acc = state["sum"] if state["sum"] and len(state["sum"]) == \
                len(values) else [0.0] * len(values)
            acc = [a + v for a, v in zip(acc, values)]
            state["sum"] = acc
            results[name] = Tensor(t.name, t.datatype, t.shape,
                                   struct.pack("<%df" % len(acc), *acc))

    def count(self, kind, key):
        with self.lock:
            table = self.counts[kind]
            table[key] = table.get(key, 0) + 1

    def metadata(self, name, model, version):
        """The family's metadata answer for a known model, its members
        in the family's order."""
        inputs, outputs = model.signature()
        asked = version is not None and re.fullmatch("[0-9]+", version)
        if self.family == "triton":
            # tritonserver.cc TRITONSERVER_ServerModelMetadata: the version
            # asked for, else every ready one; the config's platform, else
            # its backend; input and output shapes, nothing else
            return {"name": name,
                    "versions": [str(int(version))] if asked else ["1"],
                    "platform": "python", "inputs": inputs,
                    "outputs": outputs}
        if self.family == "kserve":
            # dataplane.py model_metadata, its pydantic model: versions
            # unset is null, platform always ""
            return {"name": name, "versions": None, "platform": "",
                    "inputs": inputs, "outputs": outputs}
        if self.family == "openvino":
            # kfs_grpc_inference_service.cpp buildResponse: every ready
            # version, "OpenVINO", tensors from a std::map: name order
            def by_name(t):
                return t["name"]
            return {"name": name, "versions": ["1"], "platform": "OpenVINO",
                    "inputs": sorted(inputs, key=by_name),
                    "outputs": sorted(outputs, key=by_name)}
        # MLServer: model.py metadata() from the model's settings (versions
        # and platform unset: [] and ""), exclude_none drops each tensor's
        # parameters; the settings' parameters always exist, so
        # "parameters" is there, its content_type null and dropped: {}
        return {"name": name, "versions": [], "platform": "",
                "inputs": inputs, "outputs": outputs, "parameters": {}}

    def find(self, name, version):
        """The model, or the family's answer to an unknown model or
        version (metadata, ready and infer ask alike)."""
        family = self.family
        if family == "kserve" and version is not None:
            # KServe: "TODO: support model_version", before all else
            raise InferError("Model versioning not supported yet.", 501)
        number = None
        if version is not None and family in ("triton", "openvino"):
            # their routes take digits only: the path is not theirs
            if not re.fullmatch("[0-9]+", version):
                if family == "triton":
                    raise RouteError(404, "Not Found")
                raise RouteError(400, "Invalid request URL")
            number = int(version)
            if number >= 2 ** 63:
                # std::stol, std::stoll: out of range
                if family == "triton":
                    raise InferError("failed to get model version from "
                                     "specified version string '%s' "
                                     "(details: stol), version should be "
                                     "an integral value > 0" % version)
                raise InferError("Model with requested version is not "
                                 "found", 404)
        model = self.model(name)
        if model is None:
            if family == "kserve":
                raise InferError("Model with name %s does not exist."
                                 % name, 404)
            if family == "mlserver":
                if version is not None:
                    raise InferError("Model %s with version %s not found"
                                     % (name, version), 404)
                raise InferError("Model %s not found" % name, 404)
            if family == "openvino":
                raise InferError("Model with requested name is not found",
                                 404)
            raise InferError("Request for unknown model: '%s' is not found"
                             % name, 404)
        # every model here is version 1 (for MLServer: its settings'
        # parameters.version, which its metadata's "versions" does not show)
        if family == "mlserver" and version not in (None, "1"):
            raise InferError("Model %s with version %s not found"
                             % (name, version), 404)
        if number is not None and number != 1:
            if family == "openvino":
                raise InferError("Model with requested version is not "
                                 "found", 404)
            raise InferError("Request for unknown model: '%s' version %d is "
                             "not found" % (name, number), 404)
        return model

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

    def infer(self, model_name, headers, body, version=None, flight=None):
        """flight: the request's in-flight counts (Flight), to which
        its tensor bytes are added once they are read."""
        model = self.find(model_name, version)

        req, tensors, raw = self.parse_request(model_name, model, headers,
                                               body)
        if flight:
            flight.parsed(tensors)
        model.check_inputs(model_name, tensors)
        with self.lock:
            params = (req or {}).get("parameters")
            self.arrivals.setdefault(
                model_name, collections.deque(maxlen=256)).append(
                {"id": (req or {}).get("id"), "parameters": params})
        state = self.sequence(model_name, req or {})
        sid = params.get("sequence_id") if isinstance(params, dict) else None
        if sid is not None:
            with self.lock:
                counts = self.sequence_counts.setdefault(model_name, {})
                key = json.dumps(sid)
                counts[key] = counts.get(key, 0) + 1
        try:
            with self.instance(model_name, flight):
                results = {t.name: t for t in model.run(tensors)}
                if state is not None:
                    self.accumulate(state, results)
        except QueueFull:
            # core's scheduler_utils.cc: UNAVAILABLE, the HTTP front's 503
            ident = req.get("id") if isinstance(req.get("id"), str) else ""
            raise InferError("[request id: %s] Exceeds maximum queue size"
                             % (ident or "<id_unknown>"), 503)
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
    # TCP_NODELAY, as asyncio sets it on every TCP transport (uvicorn:
    # KServe, MLServer): without it a header and a body written apart wait
    # for a delayed ACK, 40 ms a request on a kept-alive connection
    disable_nagle_algorithm = True
    server_version = "oip-runtime"

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("runtime: " + fmt % args + "\n")

    # A connection the answer closes is said so, as each family's server
    # says it: libevhtp (Triton, evhtp.c's reply headers) answers an
    # HTTP/1.0 request in HTTP/1.0 and a 1.1 one that asked to close
    # with "Connection: close"; h11 (uvicorn: KServe, MLServer) says
    # "connection: close" to both.  http.server closes without a word,
    # and a keepalive pool that kept the connection met the close on its
    # next request (nginx: "upstream prematurely closed connection").
    said_connection = False
    said_10 = False

    def send_response_only(self, code, message=None):
        self.said_connection = False
        self.said_10 = self.request_version == "HTTP/1.0" and \
            self.server.runtime.family == "triton"
        if self.said_10:
            self.protocol_version = "HTTP/1.0"
        try:
            super().send_response_only(code, message)
        finally:
            self.protocol_version = Handler.protocol_version

    def send_header(self, keyword, value):
        if keyword.lower() == "connection":
            self.said_connection = True
        super().send_header(keyword, value)

    def end_headers(self):
        if self.close_connection and not self.said_connection and \
                not self.said_10:
            self.send_header("Connection", "close")
        super().end_headers()

    # the infer request being answered (a Flight), None for the others
    flight = None

    def flight_end(self):
        """The request leaves the in-flight counts: just before the
        answer's last byte is written (or when it ends without one)."""
        if self.flight:
            self.flight.end()
            self.flight = None

    def reply(self, status, body=b"", headers=None):
        headers = dict(headers or {})
        chunked = headers.get("Transfer-Encoding") == "chunked"
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        if not chunked:
            self.send_header("Content-Length", str(len(body)))
        if self.command == "HEAD" or (not chunked and not body):
            self.flight_end()
        self.end_headers()
        if self.command == "HEAD":
            return
        if not chunked:
            if body:
                self.flight_end()
                self.wfile.write(body)
            return
        # uvicorn sends what it is given in pieces: two, then the end
        half = len(body) // 2
        for piece in (body[:half], body[half:]):
            if piece:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        self.flight_end()
        self.wfile.write(b"0\r\n\r\n")

    def error(self, status, message):
        self.answer(RouteError(status, message))

    def answer(self, e):
        status, body, headers = e.answer()
        if self.server.runtime.legacy_codes and \
                not isinstance(e, RouteError):
            # Triton before 2.42: RETURN_AND_RESPOND_IF_ERR said 400
            status = 400
        self.reply(status, body, headers)

    def json_reply(self, status, doc):
        self.reply(status, json.dumps(doc, separators=(",", ":")).encode(),
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
        if self.path.startswith("/_test/"):
            return self.test_hook(b"")
        runtime = self.server.runtime
        family = runtime.family
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
            info = dict(self.SERVER[family])
            if family == "triton":
                info["version"] = runtime.triton_version
            return self.reply(200, json.dumps(info).encode(),
                              {"Content-Type": "application/json"})
        if model is None:
            return self.error(404, "Not Found")
        if tail == []:
            if self.command == "GET":
                runtime.count("meta", model if version is None
                              else "%s/%s" % (model, version))
            with runtime.lock:
                fault = runtime.faults.get(model)
            if fault and self.meta_fault(model, version, *fault):
                return
        try:
            found = runtime.find(model, version)
        except InferError as e:
            return self.answer(e)
        if tail == ["ready"]:
            if family == "kserve":
                return self.reply(200, json.dumps(
                    {"name": model, "ready": True}).encode(),
                    {"Content-Type": "application/json"})
            return self.reply(200)
        if tail == []:
            return self.json_reply(200, runtime.metadata(model, found,
                                                         version))
        return self.error(404, "Not Found")

    do_HEAD = do_GET

    HTML500 = (b"<html>\r\n<head><title>500 Internal Server Error</title>"
               b"</head>\r\n<body>\r\n<center><h1>500 Internal Server "
               b"Error</h1></center>\r\n<hr><center>nginx</center>\r\n"
               b"</body>\r\n</html>\r\n")

    def meta_fault(self, model, version, mode, seconds, size):
        """A metadata GET that misbehaves as the test asked; False: answer
        it as usual after all."""
        runtime = self.server.runtime
        if mode == "slow":
            time.sleep(seconds)
            return False
        if mode == "html500":
            # what a proxy in front of the runtime sends (nginx's page)
            self.reply(500, self.HTML500, {"Content-Type": "text/html"})
            return True
        doc = runtime.metadata(model, runtime.model(model) or Model(),
                               version)
        if mode == "garbage":
            # cut in the middle: no JSON document is a strict prefix of
            # an object
            body = json.dumps(doc, separators=(",", ":")).encode()
            self.reply(200, body[:len(body) // 2],
                       {"Content-Type": "application/json"})
            return True
        if mode == "huge":
            # the model's own answer, its platform padded out to the size
            base = len(json.dumps(doc, separators=(",", ":")))
            doc["platform"] = (doc["platform"] or "") + \
                "x" * max(0, size - base)
            self.json_reply(200, doc)
            return True
        # wrong: valid JSON, wrong types: versions a number, the inputs'
        # shapes strings (or inputs an object, for a model without any),
        # outputs an object
        inputs, outputs = doc["inputs"], doc["outputs"]
        doc["versions"] = 1
        if inputs:
            doc["inputs"] = [dict(t, shape=[str(d) for d in t["shape"]])
                             for t in inputs]
        else:
            doc["inputs"] = {"name": "INPUT0", "datatype": "FP32",
                             "shape": [-1]}
        doc["outputs"] = {t["name"]: t for t in outputs}
        self.json_reply(200, doc)
        return True

    FAULTS = ("slow", "garbage", "html500", "huge", "wrong", "none")

    def test_hook(self, body):
        """/_test/...: the tests' hooks into the runtime."""
        runtime = self.server.runtime
        parts = [p for p in self.path.split("?")[0].split("/") if p][1:]
        what = parts[:1]
        name = parts[1] if len(parts) == 2 else None
        try:
            doc = json.loads(body.decode("utf-8")) if body.strip() else {}
        except (ValueError, UnicodeDecodeError) as e:
            return self.error(400, "the body is not JSON: %s" % e)
        if not isinstance(doc, dict):
            return self.error(400, "the body is not an object")

        if self.command == "GET" and parts == ["counts"]:
            with runtime.lock:
                counts = {k: dict(v) for k, v in runtime.counts.items()}
            return self.json_reply(200, counts)
        if self.command == "POST" and parts == ["reset"]:
            runtime.reset()
            return self.json_reply(200, {})
        if self.command == "GET" and parts == ["highwater"]:
            with runtime.lock:
                marks = {m: {"concurrent": v["concurrent"],
                             "running": v["running"], "bytes": v["bytes"],
                             "now": v["now"], "served": v["served"]}
                         for m, v in runtime.highwater.items()}
            return self.json_reply(200, marks)
        if self.command == "GET" and parts == ["sequence_counts"]:
            with runtime.lock:
                counts = {m: dict(v)
                          for m, v in runtime.sequence_counts.items()}
            return self.json_reply(200, counts)
        if self.command == "GET" and parts == ["arrivals"]:
            with runtime.lock:
                arrivals = {m: list(v) for m, v in runtime.arrivals.items()}
            return self.json_reply(200, arrivals)
        if self.command == "POST" and parts == ["highwater", "reset"]:
            runtime.reset_marks()
            return self.json_reply(200, {})
        if what == ["service"] and name and self.command in ("PUT",
                                                             "DELETE"):
            try:
                service = self.service_spec(
                    doc if self.command == "PUT" else {"mode": "none"})
            except ValueError as e:
                return self.error(400, str(e))
            with runtime.lock:
                if service is None:
                    runtime.services.pop(name, None)
                else:
                    runtime.services[name] = service
            return self.json_reply(200, {})
        if what == ["sequences"] and name and self.command in ("PUT",
                                                               "DELETE"):
            idle = doc.get("idle", 1) if self.command == "PUT" else 0
            if isinstance(idle, bool) or not isinstance(idle, (int, float)) \
                    or idle < 0:
                return self.error(400, "idle must be a number >= 0")
            with runtime.lock:
                if idle:
                    runtime.sequences[name] = {"idle": idle, "active": {}}
                else:
                    runtime.sequences.pop(name, None)
            return self.json_reply(200, {})
        if what == ["streaming"] and name and self.command in ("PUT",
                                                               "DELETE"):
            plan = None
            if self.command == "PUT":
                plan = {"responses": doc.get("responses", 3),
                        "spacing": doc.get("spacing", 0),
                        "fail_after": doc.get("fail_after")}
                if any(isinstance(v, bool) or not isinstance(v, (int, float))
                       or v < 0 for v in plan.values() if v is not None):
                    return self.error(400, "responses, spacing and "
                                      "fail_after must be numbers >= 0")
            with runtime.lock:
                if plan:
                    runtime.streaming[name] = plan
                else:
                    runtime.streaming.pop(name, None)
            return self.json_reply(200, {})
        if what == ["models"] and name and self.command == "PUT":
            try:
                inputs = self.signature_spec(doc, "inputs")
                outputs = self.signature_spec(doc, "outputs")
            except ValueError as e:
                return self.error(400, str(e))
            with runtime.lock:
                runtime.models[name] = Declared(inputs, outputs)
            return self.json_reply(200, {})
        if what == ["models"] and name and self.command == "DELETE":
            with runtime.lock:
                gone = runtime.models.pop(name, None)
            if gone is None:
                return self.error(404, "no model '%s'" % name)
            return self.json_reply(200, {})
        if what == ["meta_fault"] and name and self.command == "PUT":
            mode = doc.get("mode")
            seconds = doc.get("seconds", 0)
            size = doc.get("bytes", 10 * 1024 * 1024)
            if mode not in self.FAULTS:
                return self.error(400, "mode must be one of %s"
                                  % ", ".join(self.FAULTS))
            for k, v in (("seconds", seconds), ("bytes", size)):
                if isinstance(v, bool) or not isinstance(v, (int, float)) \
                        or v < 0:
                    return self.error(400, "%s must be a number >= 0" % k)
            with runtime.lock:
                if mode == "none":
                    runtime.faults.pop(name, None)
                else:
                    runtime.faults[name] = (mode, seconds, int(size))
            return self.json_reply(200, {})
        return self.error(404, "Not Found")

    @staticmethod
    def service_spec(doc):
        """A PUT /_test/service body as a Service, or None: cleared."""
        form = ('the body is {"seconds": S, "instances": N, "max_queue": Q} '
                '(S >= 0, N >= 1, Q >= 0: Triton\'s max_queue_size, 0 '
                'none), or {"mode": "none"}')
        unknown = sorted(set(doc) - {"seconds", "instances", "max_queue",
                                     "mode"})
        if unknown:
            raise ValueError("unknown member '%s': %s" % (unknown[0], form))
        if "mode" in doc:
            if doc["mode"] != "none" or len(doc) > 1:
                raise ValueError("mode can only be \"none\", alone: %s"
                                 % form)
            return None
        if "seconds" not in doc:
            raise ValueError("seconds is missing: %s" % form)
        seconds, instances = doc["seconds"], doc.get("instances", 1)
        if isinstance(seconds, bool) or \
                not isinstance(seconds, (int, float)) or \
                not math.isfinite(seconds) or seconds < 0:
            raise ValueError("seconds must be a number >= 0, not %s"
                             % json.dumps(seconds))
        if isinstance(instances, bool) or not isinstance(instances, int) \
                or instances < 1:
            raise ValueError("instances must be an integer >= 1, not %s"
                             % json.dumps(instances))
        max_queue = doc.get("max_queue", 0)
        if isinstance(max_queue, bool) or not isinstance(max_queue, int) \
                or max_queue < 0:
            raise ValueError("max_queue must be an integer >= 0, not %s"
                             % json.dumps(max_queue))
        if seconds == 0:
            return None
        return Service(float(seconds), instances, max_queue)

    @staticmethod
    def signature_spec(doc, key):
        """A PUT body's "inputs" or "outputs" as (name, datatype, dims)."""
        spec = doc.get(key, [])
        if not isinstance(spec, list):
            raise ValueError("'%s' must be an array" % key)
        out = []
        for t in spec:
            if not isinstance(t, dict) or \
                    not isinstance(t.get("name"), str) or \
                    not isinstance(t.get("datatype"), str) or \
                    not isinstance(t.get("shape"), list) or \
                    any(isinstance(d, bool) or not isinstance(d, int) or
                        d < -1 for d in t["shape"]):
                raise ValueError("each of '%s' must be {\"name\": string, "
                                 "\"datatype\": string, \"shape\": "
                                 "[integer >= -1, ...]}" % key)
            out.append((t["name"], t["datatype"], list(t["shape"])))
        return out

    def do_PUT(self):
        if not self.path.startswith("/_test/"):
            # what BaseHTTPRequestHandler answers without a do_PUT
            return self.send_error(501, "Unsupported method (%r)"
                                   % self.command)
        self.test_hook(self.read_body())

    do_DELETE = do_PUT

    def loose_infer(self):
        """An infer path with a slash too many ("…/infer/", "//"), as
        each family answers it; None when the path is exact.  Triton
        matches its routes on the raw path with RE2::FullMatch: 404 "Not
        Found"; OVMS finds no route: 400 "Invalid request URL"; FastAPI
        (KServe, MLServer) redirects to the path without the slash
        (Starlette's redirect_slashes): a 307 with an empty body.  True
        once answered."""
        path, _, query = self.path.partition("?")
        if "//" not in path and not path.endswith("/"):
            return False
        exact = "/" + "/".join(p for p in path.split("/") if p)
        if not re.fullmatch(r"/v2/models/[^/]+(/versions/[^/]+)?/infer",
                            exact):
            return False
        family = self.server.runtime.family
        if family == "triton":
            self.error(404, "Not Found")
        elif family == "openvino":
            self.error(400, "Invalid request URL")
        elif "//" in path:
            # Starlette's router matches no route and redirects nothing
            self.json_reply(404, {"detail": "Not Found"})
        else:
            host = self.headers.get("Host", "127.0.0.1")
            self.reply(307, b"", {"location": "http://%s%s%s" % (
                host, path.rstrip("/"), "?" + query if query else "")})
        return True

    def do_POST(self):
        # an infer request is in flight from here, before its body is read
        self.flight = None
        path = self.path.split("?")[0]
        if not path.startswith("/_test/") and "//" not in path and \
                not path.endswith("/"):
            model, tail, _ = self.route()
            if model not in (None, "server") and tail == ["infer"]:
                self.flight = Flight(self.server.runtime, model)
        try:
            self.post()
        finally:
            self.flight_end()

    def post(self):
        body = self.read_body()
        if self.path.startswith("/_test/"):
            return self.test_hook(body)
        runtime = self.server.runtime
        if self.loose_infer():
            return
        model, tail, version = self.route()
        if runtime.family == "mlserver" and model not in (None, "server") \
                and tail in (["infer_stream"], ["generate_stream"]):
            return self.infer_stream(model, version, body)
        if runtime.family == "triton" and model not in (None, "server") \
                and tail in (["generate"], ["generate_stream"]):
            return self.generate(model, version, body,
                                 tail == ["generate_stream"])
        if model in (None, "server") or tail != ["infer"]:
            return self.error(404, "Not Found")
        runtime.count("infer", model)

        enc = self.headers.get("Content-Encoding", "")
        try:
            runtime.find(model, version)
            if enc in ("gzip", "deflate"):
                if not body:
                    raise InferError("nothing to be decompressed")
                body = zlib.decompress(body, 47)    # zlib or gzip wrapper
            elif enc not in ("", "identity"):
                return self.error(501, "Unsupported compression type")
            out, headers = runtime.infer(model, self.headers, body,
                                         version, self.flight)
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


    def infer_stream(self, model, version, body):
        """MLServer's infer_stream and generate_stream (rest/endpoints.py,
        handlers/dataplane.py): an infer request in, server-sent events
        out, "data: <answer>\\n\\n" each (rest/responses.py
        ServerSentEvent), text/event-stream; charset=utf-8, chunked, no
        Content-Length.  A model that does not stream answers once
        (MLModel.predict_stream's fallback); one that does
        (/_test/streaming) N times, spaced, each answer with an output
        INDEX.  The model is looked up inside the stream's generator,
        after Starlette began the answer: with gzip on (the default) an
        error before the first event is a plain-text 500, after it the
        connection is closed with no last chunk (uvicorn)."""
        runtime = self.server.runtime
        runtime.count("infer", model)
        with runtime.lock:
            plan = runtime.streaming.get(model)
        try:
            runtime.find(model, version)
            out, _ = runtime.infer(model, self.headers, body, version,
                                   self.flight)
        except InferError:
            return self.reply(500, b"Internal Server Error",
                              {"Content-Type": "text/plain; charset=utf-8"})
        doc = json.loads(out)
        doc.setdefault("id", str(uuid.uuid4()))
        n = plan["responses"] if plan else 1
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for k in range(n):
            if plan:
                if self.gone_within(plan["spacing"]):
                    runtime.count("gone", model)
                    self.close_connection = True
                    return
                if k == plan["fail_after"]:
                    self.close_connection = True
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                one = dict(doc, outputs=doc["outputs"] + [
                    {"name": "INDEX", "datatype": "INT32", "shape": [1],
                     "data": [k]}])
            else:
                one = doc
            event = b"data: " + json.dumps(one, separators=(",", ":")) \
                .encode() + b"\n\n"
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.flush()
            except OSError:
                # the client went (uvicorn: the generator is closed)
                runtime.count("gone", model)
                self.close_connection = True
                return
        self.wfile.write(b"0\r\n\r\n")


    def generate(self, model, version, body, stream):
        """Triton's generate extension (http_server.cc HandleGenerate,
        ConvertGenerateRequest, ExactMappingInput, ExactMappingOutput):
        each key (those inside "parameters" too) an input when the model
        has one by that name, else a request parameter; an input's
        values a scalar or an array (nested ones flattened, counted by
        the outer one), typed by the metadata, its shape the metadata's
        with the innermost -1 taking what fixed dimensions leave and
        other -1 at 1; the answer every output at the top level (one
        element unwrapped), id when not empty, model_name,
        model_version, the response parameters, keys in byte order.
        TritonJson's failures are 500s, as there."""
        runtime = self.server.runtime

        def fail(status, message):
            raise InferError(message, status)

        def convert(doc, meta, inputs, params, nested):
            for k, v in doc.items():
                if k == "parameters" and not nested:
                    if k in meta:
                        fail(400, "Keyword 'parameters' for nested schema "
                             "also given as input tensor name")
                    if not isinstance(v, dict):
                        fail(500, "Expected JSON object for keyword: "
                             "'parameters': attempt to access JSON "
                             "non-object as object")
                    try:
                        convert(v, meta, inputs, params, True)
                    except InferError as e:
                        fail(e.status, "Converting keyword: 'parameters': "
                             + str(e))
                elif k in meta:
                    inputs.append(tensor(k, v, meta[k]))
                elif isinstance(v, (str, int, float)):
                    params[k] = v
                else:
                    fail(400, "parameter '%s' has invalid type. It should be "
                         "either 'int', 'bool', or 'string'." % k)

        def leaves(v):
            if isinstance(v, list):
                for x in v:
                    yield from leaves(x)
            else:
                yield v

        def tensor(name, v, spec):
            dt, shape = spec["datatype"], list(spec["shape"])
            count = len(v) if isinstance(v, list) else 1
            values = list(leaves(v))
            kinds = {"BOOL": (bool,), "BYTES": (str,)}
            for x in values:
                if dt in kinds:
                    ok = isinstance(x, kinds[dt])
                elif dt.startswith("FP"):
                    ok = isinstance(x, (int, float)) and \
                        not isinstance(x, bool)
                else:
                    ok = isinstance(x, int) and not isinstance(x, bool) \
                        and (x >= 0 or not dt.startswith("UINT"))
                if not ok:
                    fail(500, "Unable to parse 'data': attempt to access "
                         "JSON non-%s" % {"BOOL": "boolean as boolean",
                                          "BYTES": "string as string"}.get(
                                              dt, "number as double"))
            if len(values) != count:
                fail(500, "Unable to parse 'data': Shape does not match "
                     "true shape of 'data' field")
            left = count
            for d in reversed(shape):
                if d != -1:
                    if d == 0 or left % d:
                        fail(400, "The schema can not convert input '%s' to "
                             "tensor with proper shape" % name)
                    left //= d
            for i in reversed(range(len(shape))):
                if shape[i] == -1:
                    shape[i], left = left, 1
            if left != 1:
                fail(400, "The schema can not convert input '%s' to tensor "
                     "with proper shape" % name)
            return {"name": name, "datatype": dt, "shape": shape,
                    "data": values}

        def answer(out):
            doc = json.loads(out)
            gen = {}
            for k, v in sorted((doc.get("parameters") or {}).items()):
                gen.setdefault(k, v)
            for o in doc.get("outputs", []):
                data = list(leaves(o["data"]))
                gen.setdefault(o["name"], data[0] if len(data) == 1
                               else data)
            if doc.get("id"):
                gen["id"] = doc["id"]
            gen["model_name"] = doc["model_name"]
            gen["model_version"] = doc.get("model_version") or "1"
            return json.dumps(dict(sorted(gen.items())),
                              separators=(",", ":")).encode()

        try:
            m = runtime.find(model, version)
            meta = {t["name"]: t for t in
                    runtime.metadata(model, m, version)["inputs"]}
            try:
                doc = json.loads(body)
            except ValueError as e:
                fail(500, "failed to parse the request JSON buffer: %s" % e)
            if not isinstance(doc, dict):
                fail(500, "attempt to get members for non-object")
            rid = doc.get("id")
            if rid is not None and not isinstance(rid, str):
                fail(500, "Unable to parse 'id': attempt to access JSON "
                     "non-string as string")
            inputs, params = [], {}
            convert(doc, meta, inputs, params, False)
            req = {"inputs": inputs}
            if rid:
                req["id"] = rid
            out, _ = runtime.infer(model, {}, json.dumps(req).encode(),
                                   version, self.flight)
            runtime.count("generate", model)
            data = answer(out)
        except InferError as e:
            return self.answer(e)
        if not stream:
            return self.reply(200, data, {"Content-Type": "application/json"})
        event = b"data: " + data + b"\n\n"
        self.reply(200, event, {
            "Content-Type": "text/event-stream; charset=utf-8",
            "Transfer-Encoding": "chunked"})

    def gone_within(self, seconds):
        """Whether the client closed its connection in the next seconds
        (uvicorn sees the disconnect as it comes, and cancels)."""
        end = time.time() + seconds
        while True:
            left = end - time.time()
            r, _, _ = select.select([self.connection], [], [],
                                    max(0, min(left, 0.01)))
            if r:
                try:
                    if not self.connection.recv(1, socket.MSG_PEEK):
                        return True
                except OSError:
                    return True
            if left <= 0:
                return False


class FrontendHandler(Handler):
    """Triton's SageMaker and Vertex AI frontends (src/sagemaker_server.cc,
    src/vertex_ai_server.cc), on ports of their own beside the HTTP one:
    the JSON's length is read only from the Content-Type's
    json-header-size, as a prefix at its very start parsed by atoi; an
    IHCL header is not read.  SageMaker answers binary data with that
    media type and no IHCL; Vertex AI answers as the HTTP frontend."""

    MIME = {"sagemaker": "application/vnd.sagemaker-triton.binary+json;"
                         "json-header-size=",
            "vertex": "application/vnd.vertex-ai-triton.binary+json;"
                      "json-header-size="}

    def frontend_headers(self, body):
        """The request's headers as the runtime reads them: the length
        from the media type, or none (all JSON)."""
        mime = self.MIME[self.server.frontend]
        ctype = self.headers.get("Content-Type")
        headers = {"Content-Type": "application/json"}
        if ctype is None or mime not in ctype:
            return headers
        if not ctype.startswith(mime):
            raise InferError("expect MIME type for binary data starts with "
                             "'%s', got: %s" % (mime, ctype))
        m = re.match(r"\s*[+-]?\d+", ctype[len(mime):])
        n = int(m.group(0)) if m else 0                     # atoi
        if n < 0 or n > len(body):
            raise InferError("inference header size should be in range "
                             "(0, %d), got: %s" % (len(body),
                                                   ctype[len(mime):]))
        headers[IHCL] = str(n)
        headers["Content-Type"] = "application/octet-stream"
        return headers

    def frontend_route(self):
        """(model, or None: not an infer route)"""
        path = self.path.split("?")[0]
        if self.server.frontend == "sagemaker":
            if path == "/invocations":
                return self.server.default_model
            m = re.fullmatch(r"/models/([^/]+)/invoke", path)
            return m.group(1) if m else None
        if path != "/predict":
            return None
        redirect = self.headers.get("X-Vertex-Ai-Triton-Redirect")
        if redirect is None:
            return self.server.default_model
        m = re.fullmatch(r"v2/models/([^/]+)/infer", redirect)
        return m.group(1) if m else None

    def do_GET(self):
        path = self.path.split("?")[0]
        if path in ("/ping", "/health"):
            return self.reply(200)
        return self.reply(400)

    do_HEAD = do_GET

    def do_POST(self):
        model = self.frontend_route()
        self.flight = None if model is None else \
            Flight(self.server.runtime, model)
        try:
            self.frontend_post(model)
        finally:
            self.flight_end()

    def frontend_post(self, model):
        body = self.read_body()
        runtime = self.server.runtime
        if model is None:
            return self.reply(400)
        runtime.count("infer", model)
        try:
            runtime.find(model, None)
            out, headers = runtime.infer(model, self.frontend_headers(body),
                                         body, None, self.flight)
        except InferError as e:
            return self.answer(e)
        n = headers.pop(IHCL, None)
        if self.server.frontend == "sagemaker":
            headers["Content-Type"] = ("application/json" if n is None
                                       else self.MIME["sagemaker"] + n)
        elif n is not None:
            headers[IHCL] = n
        self.reply(200, out, headers)


def frontend(kind, host, port, runtime, default_model, verbose):
    """Serves kind's frontend on port, in a thread, for runtime."""
    server = ThreadingHTTPServer((host, port), FrontendHandler)
    server.daemon_threads = True
    server.runtime = runtime
    server.verbose = verbose
    server.frontend = kind
    server.default_model = default_model
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8001)
    ap.add_argument("--family", default="triton",
                    choices=["triton", "kserve", "openvino", "mlserver",
                             "jsononly"])
    ap.add_argument("--triton-version", default="2.49.0",
                    help="below 2.42, Triton's errors are all 400")
    ap.add_argument("--sagemaker-port", type=int,
                    help="Triton's SageMaker frontend there too")
    ap.add_argument("--vertex-port", type=int,
                    help="Triton's Vertex AI frontend there too")
    ap.add_argument("--default-model", default="simple",
                    help="what /invocations and /predict infer")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    server.runtime = Runtime(args.family, args.triton_version)
    server.verbose = args.verbose

    for kind, port in (("sagemaker", args.sagemaker_port),
                       ("vertex", args.vertex_port)):
        if port:
            frontend(kind, args.host, port, server.runtime,
                     args.default_model, args.verbose)

    def stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    print("oip-runtime (%s) listening on %s:%d"
          % (args.family, args.host, server.server_address[1]), flush=True)
    # polled often: a SIGTERM's shutdown() waits for the poll
    server.serve_forever(poll_interval=0.05)
    server.server_close()


if __name__ == "__main__":
    main()
