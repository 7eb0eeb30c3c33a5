#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""An example Open Inference Protocol runtime over gRPC, for the tests.

It serves inference.GRPCInferenceService (grpc_predict_v2.proto beside
it: ServerLive, ServerReady, ModelReady, ServerMetadata, ModelMetadata,
ModelInfer, and Triton's ModelStreamInfer) in plaintext HTTP/2 (h2c,
what nginx's grpc_pass speaks without SSL), for the models of
oip_runtime.py, the way Triton's gRPC frontend answers.

    oip_grpc_runtime.py --port 9001 [--hook-port 9002] [--host 127.0.0.1]
                        [--contents raw|typed] [--max-message BYTES]
                        [--stubs DIR] [--keep N] [--workers N]
                        [--decoupled M:N:S] [--no-stream] [--verbose]

The Python stubs are not kept in the repository: they are generated at
start from the .proto, with Debian's protoc (protobuf-compiler) and
grpc_python_plugin (protobuf-compiler-grpc) or, without them,
python3-grpc-tools, into --stubs DIR (default: a temporary directory),
and reused from DIR while they are newer than the .proto.
A client (a test) can import grpc_predict_v2_pb2 and _pb2_grpc from there.

Triton's habits, as its sources show them (server: src/grpc/, src/common.*;
core: src/):
  versions      model_version is read with std::stol (common.cc
                GetModelVersionFromString): "" is the latest, leading
                blanks and trailing garbage pass ("1x" is 1), no digits is
                INVALID_ARGUMENT "failed to get model version from
                specified version string 'v' (details: stol), version
                should be an integral value > 0", a negative one "invalid
                model version specified 'v' , version should be an
                integral value > 0"
  unknown       NOT_FOUND "Request for unknown model: 'm' is not found", or
                "...: 'm' version 2 is not found" (core
                model_repository_manager.cc GetModel); for ModelInfer,
                ModelReady and ModelMetadata alike (grpc_server.cc)
  status codes  TRITONSERVER_ERROR_* to gRPC codes one to one, UNSUPPORTED
                being UNIMPLEMENTED (grpc_utils.cc CodeToStatus); every
                error is answered trailers-only, no message
  parameters    sequence_id int64 or string, sequence_start/_end bool,
                priority int64 >= 0 or uint64, timeout int64, "triton_"
                keys reserved, any other key bool, int64, string or
                double; uint64 elsewhere is refused (infer_handler.cc
                SetInferenceRequestMetadata)
  inputs        a second input of a name: "[request id: ...] input 'x'
                already exists in request" (core infer_request.cc
                AddOriginalInput, LogRequest() prefixes the messages of
                core's request checks); then per input (infer_handler.cc
                InferGRPCToInput): contents and raw_input_contents in one
                request is INVALID_ARGUMENT "contents field must not be
                specified when using raw_input_contents for 'x' for model
                'm'"; typed contents: the field must fit the datatype, else
                "unexpected explicit tensor data for input tensor 'x' for
                model 'm' of type 'FP32', expected datatype 'FP16'" (FP16
                and BF16 have no field: raw only), two fields "... binary
                data was already supplied."; int_contents and uint_contents
                give INT8/INT16/UINT8/UINT16 their low bytes (no range
                check), bytes_contents become 4-byte lengths and bytes;
                raw contents are taken in order, one per input without
                contents, extra ones ignored, a missing one "unable to find
                data for input tensor 'x' for model 'm' in request."
  sizes         core Normalize: requested outputs first ("unexpected
                inference output 'o' for model 'm'", model.cc GetOutput),
                then the model's inputs (oip_runtime.py's Model checks),
                then "input byte size mismatch for input 'x' for model
                'm'. Expected N, got M"; BYTES are walked as
                ValidateBytesInputs does: "incomplete string length
                indicator ...", "unexpected number of string elements
                ...", "expected N string elements ..." (a last element
                cut short passes, as there); ours: a datatype the protocol
                does not have is "invalid datatype for input x" (Triton's
                REST words), and a model that declares no outputs
                (identity) has its requested outputs checked after it ran
  shared memory a tensor's "shared_memory_region" names a region, and none
                is registered here: NOT_FOUND "Unable to find shared memory
                region: 'r'" (shared_memory_manager.cc GetMemoryInfo)
  model fails   INTERNAL "the model failed" (a Python-backend error)
  answers       id (empty if none), model_name, model_version "1" (the
                version served, std::to_string), each output with name,
                datatype and shape, no parameters; every output's bytes in
                raw_output_contents, one per output in the model's order,
                only the requested ones (infer_handler.cc
                ResponseAllocatorHelper, infer_handler.h
                InferResponseCompleteCommon)
  streams       ModelStreamInfer (stream_infer_handler.cc): each request
                read as ModelInfer reads it; a model that is not
                decoupled answers once, a decoupled one N times; every
                answer's parameters carry triton_final_response (true on
                the last); an error is a message of the stream
                (error_message, infer_response holding the request's id),
                and the stream goes on; ModelInfer on a decoupled model
                is UNIMPLEMENTED "ModelInfer RPC doesn't support models
                with decoupled transaction policy" (infer_handler.cc);
                a client that cancels, or whose connection goes, is seen
                through is_active() (Triton's AsyncNotifyWhenDone, since
                23.10) and the call stops
  health        ServerLive and ServerReady true; ModelReady true, or the
                errors above (grpc_server.cc)
  metadata      ServerMetadata: name "triton", version and extensions as
                oip_runtime.py's triton family answers /v2; ModelMetadata:
                name, versions (the one asked for, else ["1"]), platform
                ("python"), inputs and outputs with shapes, as the triton
                family's REST metadata (tritonserver.cc
                TRITONSERVER_ServerModelMetadata)
  limits        Triton raises grpc's limits to INT32_MAX both ways
                (common.h MAX_GRPC_MESSAGE_SIZE, grpc_server.cc); here
                grpc's own defaults hold unless --max-message sets both:
                4 MiB received (more: RESOURCE_EXHAUSTED "Received message
                larger than max (N vs. 4194304)", from grpc itself, the
                handler never called), unlimited sent

grpc's C core checks the request's HTTP/2 headers before any handler
runs, here as in Triton (the same core): without "te: trailers" the
answer is trailers-only grpc-status 2 (UNKNOWN) "Missing :te header";
te, content-type, grpc-encoding and grpc-timeout never reach the
application, so the received list cannot show them (grpc-timeout shows
as "timeout", the seconds left).

--contents typed answers as runtimes that use no raw contents do (issue
15 names TorchServe; not Triton's way): each output in the typed contents
field of its datatype, FP16 and BF16 still in raw_output_contents.  If any
output is raw, raw_output_contents has one entry per output, empty for
those carried in contents, so that the index is the output's.

Test hooks, HTTP/1.1 on --hook-port (default --port + 1; JSON in and out):
  GET    /_test/received      the last --keep (16) calls, oldest first:
                              {"method", "metadata": [[key, value]] (what
                              grpc shows: user-agent and the custom ones;
                              -bin values in base64), "timeout", "answer":
                              {"code", "message"}, "fault"}, and for
                              ModelInfer "model_name", "model_version",
                              "id", "parameters": {key: {"kind":
                              "int64_param", "value": 5}}, "inputs":
                              [{"name", "datatype", "shape", "parameters",
                              "carrier": raw|typed|none, "contents"
                              (typed: {field: values}, bytes in base64),
                              "data_b64": the tensor's bytes as Triton
                              assembles them, or null}], "outputs": [{"name",
                              "parameters"}], "raw_input_contents": [sizes];
                              the other rpcs: their request's fields
  POST   /_test/reset         calls, faults, models and contents cleared
  PUT    /_test/fault         {"mode": M, "methods": ["ModelInfer"], "times":
                              n (default: until changed)}; modes:
                              status   {"code": "UNAVAILABLE" or 14,
                                       "message": "..."}: that error,
                                       trailers-only (context.abort)
                              slow     {"seconds": S}: then the answer
                              oversize {"bytes": N}: the answer made bigger
                                       than N bytes: ModelInfer gets one
                                       more output, "PADDING" (UINT8 [n],
                                       zeros); other rpcs an unknown field
                                       (2047) that parsers must skip; above
                                       --max-message grpc refuses to send
                                       it: RESOURCE_EXHAUSTED
                              malformed {"hex": "..."} (default 0a64616263:
                                       a field that claims 100 bytes and
                                       has 3): bytes that are no message,
                                       sent as the answer
                              reset    the connection the call came on is
                                       shut down (FIN, then RST: SO_LINGER
                                       0), no answer; every other call on
                                       it dies too
                              none     cleared
  PUT    /_test/decoupled/{m} m is decoupled (Triton's transaction policy):
                              {"responses": N (3), "spacing": S seconds
                              before each (0), or [S0, S1, ...] one an
                              answer (the last for the rest),
                              "error_after": k (an error_message in the
                              stream instead of answer k, "error": its
                              text), "status_after":
                              k (the stream ends with "code" and "message"
                              in its trailers instead), "reset_after": k
                              (its connection shut down instead, as the
                              fault "reset"), "stamp": bool (each answer
                              says when it left, parameter sent_ns: the
                              bench's clock), "empty_final": bool
                              (an empty last answer flagged
                              triton_final_response, as Triton sends when
                              the request asks with
                              triton_enable_empty_final_response)}; each
                              answer is m's own plus an output INDEX (INT32
                              [1], k); ModelInfer refuses it
  DELETE /_test/decoupled/{m} not decoupled again
  GET    /_test/cancelled     {"calls": n}: calls whose client cancelled
                              them, or whose connection went, while they
                              ran (a slow ModelInfer, a stream)
  PUT    /_test/contents      {"typed": true|false}: as --contents
  PUT    /_test/health        {"live": bool, "ready": bool}: what
                              ServerLive, and ServerReady and ModelReady
                              (a model still loading), answer; reset: true
  PUT    /_test/models/{m}    {"inputs": [...], "outputs": [...]}: as
  DELETE /_test/models/{m}    oip_runtime.py's

Why reset is not an RST_STREAM: grpc's HTTP/2 transport, on the server
side, turns every cancellation that carries a status (all that Python's
API can make: context.cancel() is CANCELLED, abort() any code) into a
trailers-only answer (chttp2_transport.cc grpc_chttp2_cancel_stream calls
close_from_api); it sends RST_STREAM only for its own errors.  Shutting
the connection down from under it is the nearest a test can get.

Standard library, grpcio and protobuf only (Debian: python3-grpcio,
python3-protobuf; protobuf-compiler and protobuf-compiler-grpc, or
python3-grpc-tools, for the stubs).
"""

import argparse
import array
import base64
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = "grpc_predict_v2.proto"
STUBS = ("grpc_predict_v2_pb2.py", "grpc_predict_v2_pb2_grpc.py")
PLUGIN = "/usr/bin/grpc_python_plugin"

sys.path.insert(0, HERE)
import oip_runtime as oip                                       # noqa: E402
from oip_runtime import (DTYPES, Declared, InferError,          # noqa: E402
                         ModelFailed, Runtime, Tensor)

import grpc                                                     # noqa: E402

SERVICE = "inference.GRPCInferenceService"
METHODS = ("ServerLive", "ServerReady", "ModelReady", "ServerMetadata",
           "ModelMetadata", "ModelInfer")


# ----------------------------------------------------------------- stubs


def stubs_fresh(out):
    """The stubs in out, if they are there and newer than the .proto."""
    try:
        proto = os.path.getmtime(os.path.join(HERE, PROTO))
        return all(os.path.getmtime(os.path.join(out, s)) >= proto
                   for s in STUBS)
    except OSError:
        return False


def generate_stubs(out):
    """The .proto's Python stubs into out: Debian's protoc with its
    grpc_python_plugin (protoc is the version of python3-protobuf, both
    built from one source), else grpc_tools.protoc in this process
    (python3-grpc-tools, which carries a protoc of its own, older).
    Written beside, then renamed, so that runtimes started together can
    share out."""
    os.makedirs(out, exist_ok=True)
    if stubs_fresh(out):
        return
    work = tempfile.mkdtemp(prefix=".stubs-", dir=out)
    try:
        args = ["-I" + HERE, "--python_out=" + work,
                "--grpc_python_out=" + work, PROTO]
        rc = None
        if shutil.which("protoc") and os.path.exists(PLUGIN):
            rc = subprocess.call(
                ["protoc", "--plugin=protoc-gen-grpc_python=" + PLUGIN]
                + args)
        if rc != 0:
            try:
                from grpc_tools import protoc
                rc = protoc.main(["grpc_tools.protoc"] + args)
            except ImportError:
                pass
        if rc != 0:
            sys.exit("oip-grpc-runtime: cannot generate the stubs: install "
                     "protobuf-compiler and protobuf-compiler-grpc, or "
                     "python3-grpc-tools")
        for s in STUBS:
            os.replace(os.path.join(work, s), os.path.join(out, s))
    finally:
        shutil.rmtree(work, ignore_errors=True)


pb = None       # grpc_predict_v2_pb2, once generated


def load_stubs(out):
    global pb
    generate_stubs(out)
    sys.path.insert(0, out)
    import grpc_predict_v2_pb2
    pb = grpc_predict_v2_pb2


# ------------------------------------------------------------- protocol


class GrpcError(Exception):
    """An error answered as a gRPC status, trailers-only."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def invalid(message):
    return GrpcError(grpc.StatusCode.INVALID_ARGUMENT, message)


def log_request(rid):
    """Core's InferenceRequest::LogRequest(), before its checks' words."""
    return "[request id: %s] " % (rid or "<id_unknown>")


def dtype_string(name):
    """TRITONSERVER_DataTypeString of what the request named."""
    return name if name in DTYPES else "<invalid>"


def parse_version(text):
    """common.cc GetModelVersionFromString: std::stol, -1 for ""."""
    if text == "":
        return -1
    m = re.match(r"[ \t\n\v\f\r]*([+-]?[0-9]+)", text)
    if not m or not -2 ** 63 <= int(m.group(1)) < 2 ** 63:
        raise invalid("failed to get model version from specified version "
                      "string '%s' (details: stol), version should be an "
                      "integral value > 0" % text)
    number = int(m.group(1))
    if number < 0:
        raise invalid("invalid model version specified '%s' , version "
                      "should be an integral value > 0" % text)
    return number


def param_kind(p):
    return p.WhichOneof("parameter_choice")


def param_json(params):
    """A parameters map as {key: {"kind": ..., "value": ...}}."""
    return {k: {"kind": param_kind(v),
                "value": getattr(v, param_kind(v)) if param_kind(v)
                else None}
            for k, v in params.items()}


def check_parameters(params):
    """infer_handler.cc SetInferenceRequestMetadata: each kind allowed."""
    def expect(key, kinds, words):
        if param_kind(params[key]) not in kinds:
            raise invalid("invalid value type for '%s' parameter, expected "
                          "%s." % (key, words))
    for key, p in params.items():
        if key == "sequence_id":
            expect(key, ("int64_param", "string_param"),
                   "int64_param or string_param")
        elif key in ("sequence_start", "sequence_end"):
            expect(key, ("bool_param",), "bool_param")
        elif key == "priority":
            expect(key, ("int64_param", "uint64_param"),
                   "int64_param or uint64_param")
            if param_kind(p) == "int64_param" and p.int64_param < 0:
                raise invalid("invalid value for 'priority', expected "
                              "value >= 0.")
        elif key == "timeout":
            expect(key, ("int64_param",), "int64_param")
        elif key.startswith("triton_"):
            if key != "triton_enable_empty_final_response":
                raise invalid("parameter keys starting with 'triton_' are "
                              "reserved for Triton usage. Only the "
                              "following keys starting with 'triton_' are "
                              "allowed: triton_enable_empty_final_response")
            if param_kind(p) != "bool_param":
                raise invalid("invalid value type for '%s' parameter, "
                              "expected bool_param." % key)
        elif param_kind(p) not in ("int64_param", "bool_param",
                                   "string_param", "double_param"):
            raise invalid("invalid value type for '%s' parameter, expected "
                          "int64_param, bool_param, or string_param." % key)


def check_shared_memory(tensor):
    """grpc_utils.h ParseSharedMemoryParams; no region is registered."""
    p = tensor.parameters.get("shared_memory_region")
    if p is None:
        return
    if param_kind(p) != "string_param":
        raise invalid("invalid value type for 'shared_memory_region' "
                      "parameter for tensor '%s', expected string_param."
                      % tensor.name)
    raise GrpcError(grpc.StatusCode.NOT_FOUND, "Unable to find shared "
                    "memory region: '%s'" % p.string_param)


# typed contents field -> (the datatype it carries, by the input's own)
TYPED_FIELDS = (
    ("bool_contents", lambda dt: "BOOL"),
    ("int_contents", lambda dt: dt if dt in ("INT8", "INT16") else "INT32"),
    ("int64_contents", lambda dt: "INT64"),
    ("uint_contents",
     lambda dt: dt if dt in ("UINT8", "UINT16") else "UINT32"),
    ("uint64_contents", lambda dt: "UINT64"),
    ("fp32_contents", lambda dt: "FP32"),
    ("fp64_contents", lambda dt: "FP64"),
    ("bytes_contents", lambda dt: "BYTES"),
)

# datatype -> its typed field in an answer (FP16, BF16: none)
OUTPUT_FIELD = {
    "BOOL": "bool_contents", "INT8": "int_contents",
    "INT16": "int_contents", "INT32": "int_contents",
    "INT64": "int64_contents", "UINT8": "uint_contents",
    "UINT16": "uint_contents", "UINT32": "uint_contents",
    "UINT64": "uint64_contents", "FP32": "fp32_contents",
    "FP64": "fp64_contents", "BYTES": "bytes_contents",
}


def low_bytes(values, signed, width):
    """int_contents/uint_contents to INT8/16, UINT8/16: the low bytes of
    each 32-bit element, as Triton copies them (no range check)."""
    words = array.array("i" if signed else "I", values).tobytes()
    if width == 1:
        return words[0::4]
    halves = array.array("H")
    halves.frombytes(words)
    return halves[0::2].tobytes()


def typed_bytes(tensor, model_name):
    """infer_handler.cc InferGRPCToInput for an input with contents: its
    little-endian bytes, or the frontend's error."""
    dt = tensor.datatype
    c = tensor.contents
    out, byte_size = b"", 0
    for field, carries in TYPED_FIELDS:
        values = getattr(c, field)
        if not len(values):
            continue
        kind = carries(dt)
        if byte_size != 0:
            raise invalid("unexpected explicit tensor data for input tensor "
                          "'%s' for model '%s', binary data was already "
                          "supplied." % (tensor.name, model_name))
        if kind != dt:
            raise invalid("unexpected explicit tensor data for input tensor "
                          "'%s' for model '%s' of type '%s', expected "
                          "datatype '%s'" % (tensor.name, model_name, kind,
                                             dtype_string(dt)))
        if field == "bytes_contents":
            out = b"".join(struct.pack("<I", len(v)) + v for v in values)
        elif dt in ("INT8", "INT16", "UINT8", "UINT16"):
            out = low_bytes(values, dt[0] == "I", DTYPES[dt][1])
        elif dt == "BOOL":
            out = bytes(1 if v else 0 for v in values)
        else:
            out = array.array(DTYPES[dt][0], values).tobytes()
        byte_size = len(out)
    return out


def input_bytes(req):
    """Each input's (carrier, bytes) as Triton's frontend reads them."""
    out, index = [], 0
    raw = req.raw_input_contents
    for t in req.inputs:
        check_shared_memory(t)
        if t.HasField("contents") and len(raw):
            raise invalid("contents field must not be specified when using "
                          "raw_input_contents for '%s' for model '%s'"
                          % (t.name, req.model_name))
        if t.HasField("contents"):
            out.append(("typed", typed_bytes(t, req.model_name)))
        elif len(raw) > index:
            out.append(("raw", raw[index]))
            index += 1
        else:
            raise invalid("unable to find data for input tensor '%s' for "
                          "model '%s' in request." % (t.name,
                                                      req.model_name))
    return out


def check_bytes(raw, count, name, model_name, rid):
    """core infer_request.cc ValidateBytesInputs on one buffer."""
    checked, element, pos, left = 0, 0, 0, len(raw)
    while left:
        if not element:
            if left < 4:
                raise invalid(log_request(rid) + "incomplete string length "
                              "indicator for inference input '%s' for model "
                              "'%s', expecting 4 bytes but only %d bytes "
                              "available. Please make sure the string "
                              "length indicator is in one buffer."
                              % (name, model_name, left))
            (element,) = struct.unpack_from("<I", raw, pos)
            checked += 1
            if checked > count:
                raise invalid(log_request(rid) + "unexpected number of "
                              "string elements %d for inference input '%s' "
                              "for model '%s', expecting %d"
                              % (checked, name, model_name, count))
            pos += 4
            left -= 4
        step = min(element, left)
        pos += step
        left -= step
        element -= step
    if checked != count:
        raise invalid(log_request(rid) + "expected %d string elements for "
                      "inference input '%s' for model '%s', got %d"
                      % (count, name, model_name, checked))


def check_size(t, model_name, rid):
    """core Normalize: a tensor's bytes against its shape."""
    if any(d < 0 for d in t.shape):
        raise invalid(log_request(rid) + "All input dimensions should be "
                      "specified for input '%s' for model '%s', got %s"
                      % (t.name, model_name,
                         "[" + ",".join(str(d) for d in t.shape) + "]"))
    if t.datatype == "BYTES":
        return check_bytes(t.raw, t.count(), t.name, model_name, rid)
    want = t.count() * DTYPES[t.datatype][1]
    if len(t.raw) != want:
        raise invalid(log_request(rid) + "input byte size mismatch for "
                      "input '%s' for model '%s'. Expected %d, got %d"
                      % (t.name, model_name, want, len(t.raw)))


def core_error(e, rid):
    """oip_runtime's InferError from a model's checks, as core words it:
    its request checks prefixed, the model's own (GetInput) not."""
    msg = str(e)
    if not msg.startswith("unexpected inference input"):
        msg = log_request(rid) + msg
    code = {404: grpc.StatusCode.NOT_FOUND,
            500: grpc.StatusCode.INTERNAL}.get(
                e.status, grpc.StatusCode.INVALID_ARGUMENT)
    return GrpcError(code, msg)


# ---------------------------------------------------------------- server


class State:
    """What the hooks change, under one lock."""

    def __init__(self, typed, keep):
        self.lock = threading.Lock()
        self.default_typed = typed
        self.keep = keep
        self.runtime = Runtime("triton")
        self.reset()

    def reset(self):
        self.runtime.reset()
        with self.lock:
            self.received = []
            self.fault = None
            self.typed = self.default_typed
            self.live = True
            self.ready = True
            self.decoupled = dict(getattr(self, "default_decoupled", {}))
            self.cancelled = 0

    def record(self, rec):
        with self.lock:
            self.received.append(rec)
            del self.received[:-self.keep]

    def take_fault(self, method):
        """The fault for this call, if any, counted."""
        with self.lock:
            f = self.fault
            if f is None or method not in f["methods"]:
                return None
            if f["times"] is not None:
                f["times"] -= 1
                if f["times"] <= 0:
                    self.fault = None
            return dict(f)


class Service:
    def __init__(self, state, port, verbose):
        self.state = state
        self.port = port
        self.verbose = verbose

    def lookup(self, name, version):
        """The model and the version number asked for (-1: latest)."""
        number = parse_version(version)
        model = self.state.runtime.model(name)
        if model is None:
            raise GrpcError(grpc.StatusCode.NOT_FOUND,
                            "Request for unknown model: '%s' is not found"
                            % name)
        if number not in (-1, 1):
            raise GrpcError(grpc.StatusCode.NOT_FOUND,
                            "Request for unknown model: '%s' version %d is "
                            "not found" % (name, number))
        return model, number

    # the rpcs: a request to an answer, or a GrpcError

    def ServerLive(self, req):
        return pb.ServerLiveResponse(live=self.state.live)

    def ServerReady(self, req):
        return pb.ServerReadyResponse(ready=self.state.ready)

    def ModelReady(self, req):
        self.lookup(req.name, req.version)
        return pb.ModelReadyResponse(ready=self.state.ready)

    def ServerMetadata(self, req):
        info = oip.Handler.SERVER["triton"]
        return pb.ServerMetadataResponse(name=info["name"],
                                         version=info["version"],
                                         extensions=info["extensions"])

    def ModelMetadata(self, req):
        model, number = self.lookup(req.name, req.version)
        doc = self.state.runtime.metadata(
            req.name, model, None if number == -1 else str(number))
        return pb.ModelMetadataResponse(
            name=doc["name"], versions=doc["versions"],
            platform=doc["platform"],
            inputs=[pb.ModelMetadataResponse.TensorMetadata(**t)
                    for t in doc["inputs"]],
            outputs=[pb.ModelMetadataResponse.TensorMetadata(**t)
                     for t in doc["outputs"]])

    def cancelled(self, rec):
        """The client cancelled the call (or its connection went): grpc
        says so through is_active(), as Triton's AsyncNotifyWhenDone."""
        rec["answer"] = {"code": "CANCELLED", "message": "cancelled"}
        with self.state.lock:
            self.state.cancelled += 1

    def ModelInfer(self, req, stream=False):
        name, rid = req.model_name, req.id
        model, _ = self.lookup(name, req.model_version)
        with self.state.lock:
            decoupled = name in self.state.decoupled
        if decoupled and not stream:
            # infer_handler.cc: UNSUPPORTED, gRPC's UNIMPLEMENTED
            raise GrpcError(grpc.StatusCode.UNIMPLEMENTED,
                            "ModelInfer RPC doesn't support models with "
                            "decoupled transaction policy")
        check_parameters(req.parameters)
        seen = set()
        for t in req.inputs:
            if t.name in seen:
                raise invalid(log_request(rid) + "input '%s' already exists "
                              "in request" % t.name)
            seen.add(t.name)
        seen = set()
        for o in req.outputs:
            if o.name in seen:
                raise invalid(log_request(rid) + "output '%s' already exists "
                              "in request" % o.name)
            seen.add(o.name)
        carried = input_bytes(req)
        for o in req.outputs:
            check_shared_memory(o)

        # core: requested outputs, the model's inputs, then sizes
        wanted = [o.name for o in req.outputs]
        declared = [n for n, _, _ in model.outputs or []]
        if model.outputs is not None:
            for n in wanted:
                if n not in declared:
                    raise invalid("unexpected inference output '%s' for "
                                  "model '%s'" % (n, name))
        tensors = [Tensor(t.name, t.datatype, t.shape, raw)
                   for t, (_, raw) in zip(req.inputs, carried)]
        try:
            model.check_inputs(name, tensors)
        except InferError as e:
            raise core_error(e, rid)
        for t in tensors:
            if t.datatype not in DTYPES:
                raise invalid("invalid datatype for input %s" % t.name)
            check_size(t, name, rid)

        try:
            results = model.run(tensors)
        except ModelFailed as e:
            raise GrpcError(grpc.StatusCode.INTERNAL, str(e))
        names = [t.name for t in results]
        for n in wanted:
            if n not in names:
                raise invalid("unexpected inference output '%s' for model "
                              "'%s'" % (n, name))
        if wanted:
            results = [t for t in results if t.name in wanted]
        with self.state.lock:
            typed = self.state.typed
        return self.answer(req, results, typed)

    def ModelStreamInfer(self, requests, context):
        """Triton's stream (stream_infer_handler.cc): every request read
        as ModelInfer reads it; a model that is not decoupled answers
        once, a decoupled one (/_test/decoupled) as many times as it is
        told, spaced; each answer carries triton_final_response, true on
        the last; an error is in the stream (error_message, the request's
        id), which goes on; a cancelled call is counted: grpc may never
        resume a generator whose call went, so its end says it."""
        ended, recs = [], []
        gone = threading.Event()

        def over():
            gone.set()
            if not ended and recs:
                self.cancelled(recs[-1])
        context.add_callback(over)
        for one in self.stream_answers(requests, context, recs, gone):
            if one is None:
                break
            yield one
        if recs and recs[-1].get("cancelled"):
            return                  # over() counts it
        ended.append(True)
        if recs and recs[-1].get("abort"):
            context.abort(*recs[-1]["abort"])

    def stream_answers(self, requests, context, recs, gone):
        """ModelStreamInfer's answers; None when the call is to end with
        a status (recs[-1]["abort"])."""
        for req in requests:
            rec = {"method": "ModelStreamInfer",
                   "metadata": [[k, v] for k, v in
                                context.invocation_metadata()
                                if not isinstance(v, bytes)],
                   "timeout": None, "answer": None, "fault": None,
                   "request": req}
            self.state.record(rec)
            recs.append(rec)
            with self.state.lock:
                plan = self.state.decoupled.get(req.model_name)
            try:
                resp = self.ModelInfer(req, stream=True)
            except GrpcError as e:
                rec["answer"] = {"code": e.code.name, "message": str(e)}
                yield pb.ModelStreamInferResponse(
                    error_message=str(e),
                    infer_response=pb.ModelInferResponse(id=req.id))
                continue
            if plan is None:
                resp.parameters["triton_final_response"].bool_param = True
                rec["answer"] = {"code": "OK", "message": "1 response"}
                yield pb.ModelStreamInferResponse(infer_response=resp)
                continue
            n = plan["responses"]
            for k in range(n):
                gap = plan["spacing"]
                if isinstance(gap, list):
                    gap = gap[k] if k < len(gap) else gap[-1]
                # woken by the call's end, not polling: a thousand
                # streams wait here at once in the bench
                if (gap and gone.wait(gap)) or not context.is_active():
                    rec["cancelled"] = True
                    return
                if k == plan.get("error_after"):
                    rec["answer"] = {"code": "OK", "message": "error"}
                    one = pb.ModelInferResponse(
                        id=req.id, model_name=req.model_name,
                        model_version="1")
                    one.parameters["triton_final_response"].bool_param = \
                        True
                    yield pb.ModelStreamInferResponse(
                        error_message=plan["error"], infer_response=one)
                    break
                if k == plan.get("reset_after"):
                    rec["answer"] = {"code": None,
                                     "message": "connection reset"}
                    self.reset_connection(context)
                    rec["abort"] = (grpc.StatusCode.UNAVAILABLE,
                                    "connection reset")
                    yield None
                    return
                if k == plan.get("status_after"):
                    rec["answer"] = {"code": plan["code"].name,
                                     "message": plan["message"]}
                    rec["abort"] = (plan["code"], plan["message"])
                    yield None
                    return
                one = pb.ModelInferResponse()
                one.CopyFrom(resp)
                o = one.outputs.add(name="INDEX", datatype="INT32",
                                    shape=[1])
                if len(one.raw_output_contents):
                    one.raw_output_contents.append(struct.pack("<i", k))
                else:
                    o.contents.int_contents.append(k)
                one.parameters["triton_final_response"].bool_param = (
                    k == n - 1 and not plan["empty_final"])
                if plan["stamp"]:
                    one.parameters["sent_ns"].int64_param = time.time_ns()
                yield pb.ModelStreamInferResponse(infer_response=one)
            else:
                rec["answer"] = {"code": "OK", "message": "%d responses" % n}
                if plan["empty_final"]:
                    # asked with triton_enable_empty_final_response
                    one = pb.ModelInferResponse(
                        id=req.id, model_name=req.model_name,
                        model_version=req.model_version)
                    one.parameters["triton_final_response"].bool_param = \
                        True
                    yield pb.ModelStreamInferResponse(infer_response=one)

    @staticmethod
    def answer(req, results, typed):
        resp = pb.ModelInferResponse(model_name=req.model_name,
                                     model_version="1", id=req.id)
        raws = []
        for t in results:
            o = resp.outputs.add(name=t.name, datatype=t.datatype,
                                 shape=t.shape)
            field = OUTPUT_FIELD.get(t.datatype) if typed else None
            if field:
                getattr(o.contents, field).extend(t.values())
                raws.append(None)
            else:
                raws.append(t.raw)
        if any(r is not None for r in raws):
            resp.raw_output_contents.extend(r or b"" for r in raws)
        return resp

    # the faults

    @staticmethod
    def pad(method, resp, size, typed):
        """The answer made bigger than size bytes, still a valid one."""
        have = resp.ByteSize()
        if have > size:
            return resp
        n = size - have + 1
        if method == "ModelInfer":
            o = resp.outputs.add(name="PADDING", datatype="UINT8", shape=[n])
            if typed:
                o.contents.uint_contents.extend(bytes(n))
                if len(resp.raw_output_contents):
                    resp.raw_output_contents.append(b"")
            else:
                resp.raw_output_contents.append(bytes(n))
            return resp
        # field 2047, length-delimited: unknown to every message here
        tag = bytearray()
        for v in ((2047 << 3) | 2, n):
            while v > 0x7f:
                tag.append((v & 0x7f) | 0x80)
                v >>= 7
            tag.append(v)
        return resp.SerializeToString() + bytes(tag) + b"\0" * n

    def reset_connection(self, context):
        """Shut the call's TCP connection down under grpc: the socket is
        found among this process's descriptors by its two ends."""
        m = re.match(r"ipv[46]:\[?([^\]]*)\]?:([0-9]+)$", context.peer())
        if not m:
            return False
        host, port = m.group(1), int(m.group(2))
        found = False
        for fd in os.listdir("/proc/self/fd"):
            try:
                s = socket.socket(fileno=os.dup(int(fd)))
            except (OSError, ValueError):
                continue
            try:
                peer, local = s.getpeername(), s.getsockname()
                h = peer[0]
                if h.startswith("::ffff:"):
                    h = h[7:]
                if h == host and peer[1] == port and local[1] == self.port:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                 struct.pack("ii", 1, 0))
                    s.shutdown(socket.SHUT_RDWR)
                    found = True
            except (OSError, IndexError, TypeError):
                pass
            finally:
                s.close()
        return found

    # the gRPC side of each call

    def call(self, method, req, context):
        rec = {"method": method,
               "metadata": [[k, base64.b64encode(v).decode()
                             if isinstance(v, bytes) else v]
                            for k, v in context.invocation_metadata()],
               "timeout": None, "answer": None, "fault": None,
               "request": req}
        left = context.time_remaining()
        if left is not None and left < 1e8:
            rec["timeout"] = round(left, 3)
        self.state.record(rec)
        if self.verbose:
            sys.stderr.write("grpc-runtime: %s\n" % method)

        fault = self.state.take_fault(method)
        mode = fault and fault["mode"]
        rec["fault"] = mode
        if mode == "status":
            rec["answer"] = {"code": fault["code"].name,
                             "message": fault["message"]}
            context.abort(fault["code"], fault["message"])
        if mode == "slow":
            end = time.time() + fault["seconds"]
            while time.time() < end and context.is_active():
                time.sleep(min(0.01, max(0, end - time.time())))
            if not context.is_active():
                self.cancelled(rec)
                return None
        if mode == "reset":
            rec["answer"] = {"code": None, "message": "connection reset"}
            if self.reset_connection(context):
                end = time.time() + 5
                while context.is_active() and time.time() < end:
                    time.sleep(0.01)
            context.abort(grpc.StatusCode.UNAVAILABLE, "connection reset")
        if mode == "malformed":
            rec["answer"] = {"code": "OK", "message": "malformed"}
            return fault["garbage"]

        try:
            resp = getattr(self, method)(req)
        except GrpcError as e:
            rec["answer"] = {"code": e.code.name, "message": str(e)}
            context.abort(e.code, str(e))
        rec["answer"] = {"code": "OK", "message": ""}
        if mode == "oversize":
            with self.state.lock:
                typed = self.state.typed
            return self.pad(method, resp, fault["bytes"], typed)
        return resp


def serialize(msg):
    """Answers are messages, or bytes sent as they are (malformed)."""
    return msg if isinstance(msg, bytes) else msg.SerializeToString()


# OIP_GOLDEN_DIR: each ModelInferRequest as its bytes came, written to
# DIR/N.pb where N is the call's x-oip-golden metadata (the test
# harness's number for the REST request that made it: t/unit/golden/),
# and the ModelInferResponse answered to it as sent, to DIR/N.answer.pb
GOLDEN = os.environ.get("OIP_GOLDEN_DIR")
received_bytes = {}            # id of the message read: its bytes
received_lock = threading.Lock()


def keep_bytes(request_type):
    # grpc reads a request in another thread than the one that calls its
    # behaviour: the bytes go with the message they made
    def deserialize(data):
        msg = request_type.FromString(data)
        with received_lock:
            received_bytes[id(msg)] = data
        return msg
    return deserialize


def golden_number(context):
    n = dict(context.invocation_metadata()).get("x-oip-golden")
    return n if n and n.isdigit() else None


def write_golden(req, context):
    with received_lock:
        data = received_bytes.pop(id(req), None)
    n = golden_number(context)
    if data is not None and n:
        with open(os.path.join(GOLDEN, n + ".pb"), "wb") as f:
            f.write(data)


def write_golden_answer(resp, context):
    """The answer as bytes, written as they go (a message's map entries
    could be written in another order by a second serialisation)."""
    data = serialize(resp)
    n = golden_number(context)
    if n:
        with open(os.path.join(GOLDEN, n + ".answer.pb"), "wb") as f:
            f.write(data)
    return data


def handlers(service, streams=True):
    table = {}
    if streams:
        table["ModelStreamInfer"] = grpc.stream_stream_rpc_method_handler(
            service.ModelStreamInfer,
            request_deserializer=pb.ModelInferRequest.FromString,
            response_serializer=serialize)
    for method in METHODS:
        request_type = getattr(pb, method + "Request")

        def behaviour(req, context, method=method):
            if GOLDEN and method == "ModelInfer":
                write_golden(req, context)
                return write_golden_answer(service.call(method, req,
                                                        context), context)
            return service.call(method, req, context)

        table[method] = grpc.unary_unary_rpc_method_handler(
            behaviour, request_deserializer=keep_bytes(request_type)
            if GOLDEN else request_type.FromString,
            response_serializer=serialize)
    return grpc.method_handlers_generic_handler(SERVICE, table)


# ----------------------------------------------------------------- hooks


def render(rec):
    """A received call as the hooks show it."""
    out = {k: v for k, v in rec.items() if k != "request"}
    req = rec["request"]
    if rec["method"] not in ("ModelInfer", "ModelStreamInfer"):
        out.update({f.name: getattr(req, f.name)
                    for f in req.DESCRIPTOR.fields})
        return out
    out.update({"model_name": req.model_name,
                "model_version": req.model_version, "id": req.id,
                "parameters": param_json(req.parameters),
                "raw_input_contents": [len(r) for r in
                                       req.raw_input_contents]})
    try:
        carried = input_bytes(req)
    except GrpcError:
        carried = None
    inputs, index = [], 0
    for i, t in enumerate(req.inputs):
        item = {"name": t.name, "datatype": t.datatype,
                "shape": list(t.shape),
                "parameters": param_json(t.parameters)}
        if t.HasField("contents"):
            item["carrier"] = "typed"
            item["contents"] = {
                f.name: [base64.b64encode(x).decode()
                         if isinstance(x, bytes) else x for x in v]
                for f, v in t.contents.ListFields()}
        elif index < len(req.raw_input_contents):
            item["carrier"] = "raw"
            index += 1
        else:
            item["carrier"] = "none"
        item["data_b64"] = base64.b64encode(carried[i][1]).decode() \
            if carried else None
        inputs.append(item)
    out["inputs"] = inputs
    out["outputs"] = [{"name": o.name, "parameters": param_json(o.parameters)}
                      for o in req.outputs]
    return out


class Hooks(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "oip-grpc-runtime"

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("grpc-runtime hooks: " + fmt % args + "\n")

    def reply(self, status, doc):
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def fail(self, message):
        self.reply(400, {"error": message})

    def handle_hook(self):
        state = self.server.state
        length = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(length)
        try:
            doc = json.loads(body) if body.strip() else {}
        except ValueError as e:
            return self.fail("the body is not JSON: %s" % e)
        if not isinstance(doc, dict):
            return self.fail("the body is not an object")
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        if parts[:1] != ["_test"] or len(parts) not in (2, 3):
            return self.reply(404, {"error": "Not Found"})
        what = (self.command, parts[1])
        if what == ("GET", "received") and len(parts) == 2:
            with state.lock:
                recs = list(state.received)
            return self.reply(200, [render(r) for r in recs])
        if what == ("POST", "reset") and len(parts) == 2:
            state.reset()
            return self.reply(200, {})
        if what == ("PUT", "contents") and len(parts) == 2:
            if not isinstance(doc.get("typed"), bool):
                return self.fail("'typed' must be true or false")
            with state.lock:
                state.typed = doc["typed"]
            return self.reply(200, {})
        if what == ("PUT", "health") and len(parts) == 2:
            if any(not isinstance(doc.get(k, True), bool)
                   for k in ("live", "ready")):
                return self.fail("'live' and 'ready' must be true or false")
            with state.lock:
                state.live = doc.get("live", True)
                state.ready = doc.get("ready", True)
            return self.reply(200, {})
        if what == ("GET", "cancelled") and len(parts) == 2:
            with state.lock:
                return self.reply(200, {"calls": state.cancelled})
        if what[1] == "decoupled" and len(parts) == 3:
            if self.command == "DELETE":
                with state.lock:
                    state.decoupled.pop(parts[2], None)
                return self.reply(200, {})
            if self.command == "PUT":
                try:
                    plan = self.decoupled(doc)
                except ValueError as e:
                    return self.fail(str(e))
                with state.lock:
                    state.decoupled[parts[2]] = plan
                return self.reply(200, {})
        if what == ("PUT", "fault") and len(parts) == 2:
            try:
                fault = self.fault(doc)
            except ValueError as e:
                return self.fail(str(e))
            with state.lock:
                state.fault = fault
            return self.reply(200, {})
        if what[1] == "models" and len(parts) == 3:
            runtime = state.runtime
            if self.command == "PUT":
                try:
                    spec = [oip.Handler.signature_spec(doc, k)
                            for k in ("inputs", "outputs")]
                except ValueError as e:
                    return self.fail(str(e))
                with runtime.lock:
                    runtime.models[parts[2]] = Declared(*spec)
                return self.reply(200, {})
            if self.command == "DELETE":
                with runtime.lock:
                    gone = runtime.models.pop(parts[2], None)
                if gone is None:
                    return self.reply(404, {"error": "no model '%s'"
                                            % parts[2]})
                return self.reply(200, {})
        return self.reply(404, {"error": "Not Found"})

    do_GET = do_POST = do_PUT = do_DELETE = handle_hook

    MODES = ("status", "slow", "oversize", "malformed", "reset", "none")

    @staticmethod
    def decoupled(doc):
        """A PUT /_test/decoupled/{m} body, checked."""
        def count(key, default=None):
            v = doc.get(key, default)
            if v is not None and (isinstance(v, bool)
                                  or not isinstance(v, int) or v < 0):
                raise ValueError("%s must be an integer >= 0" % key)
            return v
        spacing = doc.get("spacing", 0)
        for gap in spacing if isinstance(spacing, list) and spacing \
                else [spacing]:
            if isinstance(gap, bool) or not isinstance(gap, (int, float)) \
                    or gap < 0:
                raise ValueError("spacing must be a number of seconds >= 0,"
                                 " or a list of them (one an answer)")
        plan = {"responses": count("responses", 3), "spacing": spacing,
                "error_after": count("error_after"),
                "error": str(doc.get("error", "the model failed")),
                "status_after": count("status_after"),
                "reset_after": count("reset_after"),
                "empty_final": bool(doc.get("empty_final", False)),
                "stamp": bool(doc.get("stamp", False))}
        if plan["status_after"] is not None:
            code = doc.get("code", "INTERNAL")
            try:
                plan["code"] = grpc.StatusCode[code] if isinstance(code, str) \
                    else [c for c in grpc.StatusCode if c.value[0] == code][0]
            except (KeyError, IndexError):
                raise ValueError("code must be a gRPC status name or number")
            plan["message"] = str(doc.get("message", "stream failed"))
        return plan

    @classmethod
    def fault(cls, doc):
        """A PUT /_test/fault body, checked, as State.fault keeps it."""
        mode = doc.get("mode")
        if mode not in cls.MODES:
            raise ValueError("mode must be one of %s" % ", ".join(cls.MODES))
        if mode == "none":
            return None
        methods = doc.get("methods", ["ModelInfer"])
        if not isinstance(methods, list) or \
                any(m not in METHODS for m in methods):
            raise ValueError("methods must be a list of %s"
                             % ", ".join(METHODS))
        times = doc.get("times")
        if times is not None and (isinstance(times, bool) or
                                  not isinstance(times, int) or times < 1):
            raise ValueError("times must be an integer >= 1")
        fault = {"mode": mode, "methods": methods, "times": times}
        if mode == "status":
            code = doc.get("code", "UNAVAILABLE")
            for c in grpc.StatusCode:
                if code in (c.name, c.value[0]) and \
                        not isinstance(code, bool):
                    break
            else:
                raise ValueError("code must be a gRPC status name or number")
            if c == grpc.StatusCode.OK:
                raise ValueError("code must not be OK")
            message = doc.get("message", "")
            if not isinstance(message, str):
                raise ValueError("message must be a string")
            fault.update(code=c, message=message)
        for key, default in (("seconds", 1), ("bytes", 5 * 1024 * 1024)):
            v = doc.get(key, default)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or \
                    v < 0:
                raise ValueError("%s must be a number >= 0" % key)
            fault[key] = v if key == "seconds" else int(v)
        try:
            fault["garbage"] = bytes.fromhex(doc.get("hex", "0a64616263"))
        except (TypeError, ValueError):
            raise ValueError("hex must be a string of hex digits")
        return fault


# ------------------------------------------------------------------ main


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9001)
    ap.add_argument("--hook-port", type=int, default=None,
                    help="the test hooks' HTTP port (default: --port + 1)")
    ap.add_argument("--contents", choices=["raw", "typed"], default="raw")
    ap.add_argument("--max-message", type=int, default=None,
                    help="grpc's receive and send limits (default grpc's: "
                    "4 MiB received, unlimited sent)")
    ap.add_argument("--stubs", default=None,
                    help="where the stubs are generated (default: a "
                    "temporary directory)")
    ap.add_argument("--keep", type=int, default=16,
                    help="how many calls /_test/received keeps")
    ap.add_argument("--workers", type=int, default=32,
                    help="threads serving calls: one per open stream")
    ap.add_argument("--decoupled", action="append", default=[],
                    metavar="M:N:S", help="m decoupled from the start: N "
                    "answers S seconds apart (as PUT /_test/decoupled)")
    ap.add_argument("--no-stream", action="store_true",
                    help="no ModelStreamInfer, as KServe's, OpenVINO's "
                    "and TorchServe's servers (grpc answers UNIMPLEMENTED)")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()

    stubs = args.stubs or tempfile.mkdtemp(prefix="oip-grpc-stubs-")
    try:
        load_stubs(stubs)
    finally:
        if not args.stubs:
            shutil.rmtree(stubs, ignore_errors=True)

    state = State(args.contents == "typed", max(1, args.keep))
    state.default_decoupled = {}
    for spec in args.decoupled:
        name, n, gap = (spec.split(":") + ["3", "0"])[:3]
        state.default_decoupled[name] = Hooks.decoupled(
            {"responses": int(n), "spacing": float(gap)})
    state.reset()
    hook_port = args.port + 1 if args.hook_port is None else args.hook_port
    try:
        hooks = ThreadingHTTPServer((args.host, hook_port), Hooks)
    except OSError as e:
        sys.exit("oip-grpc-runtime: hooks on %s:%d: %s"
                 % (args.host, hook_port, e))
    hooks.daemon_threads = True
    hooks.state = state
    hooks.verbose = args.verbose
    threading.Thread(target=hooks.serve_forever, daemon=True).start()

    # no SO_REUSEPORT: a second runtime on a port in use must fail
    options = [("grpc.so_reuseport", 0)]
    if args.max_message is not None:
        options += [("grpc.max_receive_message_length", args.max_message),
                    ("grpc.max_send_message_length", args.max_message)]
    server = grpc.server(futures.ThreadPoolExecutor(
                             max_workers=max(1, args.workers)),
                         options=options)
    service = Service(state, 0, args.verbose)
    server.add_generic_rpc_handlers((handlers(service,
                                              not args.no_stream),))
    try:
        port = server.add_insecure_port("%s:%d" % (args.host, args.port))
    except RuntimeError:
        port = 0
    if port == 0:
        sys.exit("oip-grpc-runtime: cannot listen on %s:%d"
                 % (args.host, args.port))
    service.port = port
    server.start()

    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())

    print("oip-grpc-runtime test hooks on %s:%d"
          % (args.host, hooks.server_address[1]), flush=True)
    print("oip-grpc-runtime listening on %s:%d" % (args.host, port),
          flush=True)
    while not done.wait(3600):
        pass
    server.stop(0.1).wait()
    hooks.server_close()


if __name__ == "__main__":
    main()
