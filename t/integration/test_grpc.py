#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""REST clients in front of a gRPC runtime (issue 15): real nginx with
oip_upstream_protocol grpc and grpc_pass, in front of the example gRPC
runtime (t/runtime/oip_grpc_runtime.py, Triton's gRPC habits), which
records what each call carried.

1. Infer requests as ModelInfer calls: every datatype, raw and typed
   contents, JSON, binary, mixed, raw binary and gzip clients.
2. ModelInferResponse, raw or typed, as the answer each client asked
   for; grpc-status as HTTP statuses; no gRPC trailers to the client.
3. Health and metadata GETs as their calls; the signature's fetch.
4. oip_grpc_max_message, and the runtime's own limit.
"""

import base64
import gzip
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import (GatewayTestCase, GrpcRuntime, IHCL, binary_body,
                     run_tests, split_binary)
from tensors import CASES, dumps, pack

SIMPLE_IN = [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32",
     "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32",
     "data": [1] * 16}]


def out_bits(out, binary=b""):
    """An answer's output as bytes, from its JSON data or binary part."""
    if "data" in out:
        return pack(out["datatype"], out["data"])
    return binary


class Grpc(GatewayTestCase):

    @classmethod
    def setUpGateway(cls):
        cls.rt = cls.start_grpc_runtime()
        cls.typed = cls.start_grpc_runtime(["--contents", "typed"])
        cls.ngx = cls.start_nginx("""
            client_max_body_size 64m;
            oip_upstream_protocol grpc;

            location /v2/ {{
                oip on;
                grpc_pass grpc://127.0.0.1:{rt};
            }}
            location /typed/ {{
                oip on;
                oip_grpc_contents typed;
                rewrite ^/typed(/.*)$ $1 break;
                grpc_pass grpc://127.0.0.1:{typed};
            }}
            location /raw/ {{
                oip on;
                oip_raw_input INPUT0 FP32 -1;
                rewrite ^/raw(/.*)$ $1 break;
                grpc_pass grpc://127.0.0.1:{rt};
            }}
            location /small/ {{
                oip on;
                oip_grpc_max_message 1k;
                rewrite ^/small(/.*)$ $1 break;
                grpc_pass grpc://127.0.0.1:{rt};
            }}
            location /big/ {{
                oip on;
                oip_grpc_max_message 64m;
                rewrite ^/big(/.*)$ $1 break;
                grpc_pass grpc://127.0.0.1:{rt};
            }}
            location /quick/ {{
                oip on;
                grpc_read_timeout 1s;
                rewrite ^/quick(/.*)$ $1 break;
                grpc_pass grpc://127.0.0.1:{rt};
            }}
            location /sig/ {{
                oip on;
                oip_signatures /_meta zone=sigs;
                rewrite ^/sig(/.*)$ $1 break;
                grpc_pass grpc://127.0.0.1:{rt};
            }}
            location /_meta/ {{
                internal;
                grpc_pass grpc://127.0.0.1:{rt};
            }}
            location /off/ {{
                grpc_pass grpc://127.0.0.1:{rt};
            }}
            location /inference.GRPCInferenceService/ {{
                oip on;
                grpc_pass grpc://127.0.0.1:{rt};
            }}
            """, http="oip_signature_zone zone=sigs:1m;",
            rt=cls.rt.port, typed=cls.typed.port)

    def setUp(self):
        for rt in (self.rt, self.typed):
            rt.hook("POST", "/_test/reset")

    def last(self, rt=None):
        return (rt or self.rt).received()[-1]

    def infer(self, model, req, prefix="", headers=None, h2=False):
        body = req if isinstance(req, bytes) else dumps(req)
        return self.ngx.post(prefix + "/v2/models/%s/infer" % model, body,
                             headers)

    # 1, 2: the infer call, both ways

    def test_every_datatype_json_both_ways(self):
        for dt, values in CASES:
            with self.subTest(dt=dt):
                req = {"id": "j", "inputs": [
                    {"name": "INPUT0", "shape": [len(values)],
                     "datatype": dt, "data": values}]}
                st, h, body = self.infer("identity", req)
                self.assertEqual(st, 200, body)
                self.assertEqual(h["content-type"], "application/json")

                call = self.last()
                self.assertEqual(call["method"], "ModelInfer")
                self.assertEqual(call["id"], "j")
                inp = call["inputs"][0]
                self.assertEqual((inp["datatype"], inp["shape"],
                                  inp["carrier"]),
                                 (dt, [len(values)], "raw"))
                self.assertEqual(base64.b64decode(inp["data_b64"]),
                                 pack(dt, values))

                out = json.loads(body)["outputs"][0]
                self.assertEqual(out["name"], "OUTPUT0")
                self.assertEqual(out_bits(out), pack(dt, values))

    def test_every_datatype_binary_both_ways(self):
        for dt, values in CASES:
            with self.subTest(dt=dt):
                chunk = pack(dt, values)
                body, n = binary_body({"inputs": [
                    {"name": "INPUT0", "shape": [len(values)],
                     "datatype": dt,
                     "parameters": {"binary_data_size": len(chunk)}}],
                    "parameters": {"binary_data_output": True}}, [chunk])
                st, h, out = self.infer("identity", body, headers={
                    IHCL: str(n), "Content-Type": "application/octet-stream"})
                self.assertEqual(st, 200, out)
                doc, rest = split_binary(h, out)
                self.assertEqual(rest, chunk)
                self.assertEqual(
                    doc["outputs"][0]["parameters"]["binary_data_size"],
                    len(chunk))
                self.assertEqual(
                    base64.b64decode(self.last()["inputs"][0]["data_b64"]),
                    chunk)

    def test_typed_contents_both_ways(self):
        for dt, values in CASES:
            if dt in ("FP16", "BF16"):
                continue
            with self.subTest(dt=dt):
                req = {"inputs": [{"name": "INPUT0", "shape": [len(values)],
                                   "datatype": dt, "data": values}]}
                st, _, body = self.infer("identity", req, prefix="/typed")
                self.assertEqual(st, 200, body)
                inp = self.last(self.typed)["inputs"][0]
                self.assertEqual(inp["carrier"], "typed")
                self.assertEqual(base64.b64decode(inp["data_b64"]),
                                 pack(dt, values))
                out = json.loads(body)["outputs"][0]
                self.assertEqual(out_bits(out), pack(dt, values))

    def test_typed_contents_refuse_fp16(self):
        for dt in ("FP16", "BF16"):
            req = {"inputs": [{"name": "INPUT0", "shape": [1],
                               "datatype": dt, "data": [1.5]}]}
            self.assertJSONError(self.infer("identity", req,
                                            prefix="/typed"), 400, dt)

    def test_request_fields(self):
        req = {"id": "r7", "parameters": {"priority": 2, "flag": True,
                                          "name": "x", "w": 0.5},
               "inputs": SIMPLE_IN,
               "outputs": [{"name": "OUTPUT1",
                            "parameters": {"binary_data": True}}]}
        st, h, body = self.ngx.post("/v2/models/simple/versions/1/infer",
                                    dumps(req))
        self.assertEqual(st, 200, body)
        call = self.last()
        self.assertEqual((call["model_name"], call["model_version"],
                          call["id"]), ("simple", "1", "r7"))
        self.assertEqual(call["parameters"], {
            "priority": {"kind": "int64_param", "value": 2},
            "flag": {"kind": "bool_param", "value": True},
            "name": {"kind": "string_param", "value": "x"},
            "w": {"kind": "double_param", "value": 0.5}})
        # the binary extension's own parameters stay at the gateway
        self.assertEqual(call["outputs"], [{"name": "OUTPUT1",
                                            "parameters": {}}])
        doc, rest = split_binary(h, body)
        self.assertEqual([o["name"] for o in doc["outputs"]], ["OUTPUT1"])
        self.assertEqual(rest, pack("INT32", [x - 1 for x in range(16)]))

    def test_sequence_ids(self):
        """Triton's gRPC front takes sequence_id as int64_param or
        string_param only (the example runtime refuses a uint64_param as
        it does): an id above INT64_MAX goes as the same 64 bits."""
        for sid, want in ((18446744073709551615,
                           {"kind": "int64_param", "value": -1}),
                          (7, {"kind": "int64_param", "value": 7}),
                          ("s-1", {"kind": "string_param", "value": "s-1"})):
            with self.subTest(sid=sid):
                req = {"parameters": {"sequence_id": sid,
                                      "sequence_start": True},
                       "inputs": SIMPLE_IN}
                st, _, body = self.ngx.post("/v2/models/simple/infer",
                                            dumps(req))
                self.assertEqual(st, 200, body)
                params = self.last()["parameters"]
                self.assertEqual(params["sequence_id"], want)
                self.assertEqual(params["sequence_start"],
                                 {"kind": "bool_param", "value": True})

    def test_mixed_client(self):
        chunk = pack("INT32", [1] * 16)
        body, n = binary_body({"inputs": [
            SIMPLE_IN[0],
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32",
             "parameters": {"binary_data_size": len(chunk)}}],
            "outputs": [{"name": "OUTPUT0"},
                        {"name": "OUTPUT1",
                         "parameters": {"binary_data": True}}]}, [chunk])
        st, h, out = self.infer("simple", body, headers={IHCL: str(n)})
        self.assertEqual(st, 200, out)
        doc, rest = split_binary(h, out)
        self.assertEqual(doc["outputs"][0]["data"],
                         [x + 1 for x in range(16)])
        self.assertEqual(rest, pack("INT32", [x - 1 for x in range(16)]))
        self.assertEqual(self.last()["raw_input_contents"], [64, 64])

    def test_raw_binary_client(self):
        values = [0.5, -1.0, 3.25]
        st, h, out = self.ngx.post("/raw/v2/models/identity_fp32/infer",
                                   pack("FP32", values),
                                   {IHCL: "0",
                                    "Content-Type":
                                    "application/octet-stream"})
        self.assertEqual(st, 200, out)
        doc, rest = split_binary(h, out)
        self.assertEqual(doc["outputs"][0]["name"], "OUTPUT0")
        self.assertEqual(rest, pack("FP32", values))
        inp = self.last()["inputs"][0]
        self.assertEqual((inp["name"], inp["datatype"], inp["shape"]),
                         ("INPUT0", "FP32", [3]))

    def test_gzip_client(self):
        st, _, body = self.infer("simple", gzip.compress(dumps(
            {"inputs": SIMPLE_IN})), headers={"Content-Encoding": "gzip"})
        self.assertEqual(st, 200, body)
        self.assertEqual(json.loads(body)["outputs"][0]["data"],
                         [x + 1 for x in range(16)])

    def test_typed_answers(self):
        # the typed runtime answers in contents; FP16 still raw
        self.rt.hook("PUT", "/_test/contents", {"typed": True})
        req = {"inputs": [
            {"name": "INPUT0", "shape": [2], "datatype": "FP16",
             "data": [1.5, -2.0]},
            {"name": "INPUT1", "shape": [3], "datatype": "INT64",
             "data": [-1, 2 ** 62, 0]}]}
        st, _, body = self.infer("identity", req)
        self.assertEqual(st, 200, body)
        outs = json.loads(body)["outputs"]
        self.assertEqual(outs[0]["data"], [1.5, -2.0])
        self.assertEqual(outs[1]["data"], [-1, 2 ** 62, 0])

    # 2: statuses, malformed answers, the trailers

    def test_grpc_statuses(self):
        for code, status in [("INVALID_ARGUMENT", 400), ("NOT_FOUND", 404),
                             ("UNAVAILABLE", 503),
                             ("RESOURCE_EXHAUSTED", 429),
                             ("DEADLINE_EXCEEDED", 504), ("INTERNAL", 500),
                             ("UNIMPLEMENTED", 501), ("UNKNOWN", 500),
                             ("PERMISSION_DENIED", 403),
                             ("UNAUTHENTICATED", 401)]:
            with self.subTest(code=code):
                self.rt.hook("PUT", "/_test/fault", {
                    "mode": "status", "code": code, "times": 1,
                    "message": "fault: 100%% %s, é" % code})
                resp = self.infer("simple", {"inputs": SIMPLE_IN})
                self.assertJSONError(resp, status,
                                     "fault: 100%% %s, é" % code)
                self.assertNotIn("grpc-status", resp[1])

    def test_runtime_error_of_its_own(self):
        req = {"inputs": [{"name": "INPUT0", "shape": [1, 16],
                           "datatype": "INT32", "data": list(range(16))}]}
        self.assertJSONError(self.infer("simple", req), 400,
                             "expected 2 inputs but got 1")
        self.assertJSONError(self.infer("nope", {"inputs": SIMPLE_IN}),
                             404, "unknown model: 'nope'")

    def test_malformed_answer(self):
        self.rt.hook("PUT", "/_test/fault", {"mode": "malformed",
                                             "times": 1})
        self.assertJSONError(self.infer("simple", {"inputs": SIMPLE_IN}),
                             502, "ModelInferResponse")

    def test_reset_and_slow(self):
        self.rt.hook("PUT", "/_test/fault", {"mode": "reset", "times": 1})
        self.assertJSONError(self.infer("simple", {"inputs": SIMPLE_IN}),
                             502)
        self.rt.hook("PUT", "/_test/fault", {"mode": "slow", "seconds": 3,
                                             "times": 1})
        self.assertJSONError(self.infer("simple", {"inputs": SIMPLE_IN},
                                        prefix="/quick"), 504)
        # and the next one is fine
        st, _, body = self.infer("simple", {"inputs": SIMPLE_IN})
        self.assertEqual(st, 200, body)

    def test_h2_client_gets_no_grpc_trailers(self):
        for path, data in [("/v2/models/simple/infer",
                            dumps({"inputs": SIMPLE_IN})),
                           ("/v2/health/ready", None)]:
            with self.subTest(path=path):
                cmd = ["curl", "-sv", "--http2-prior-knowledge",
                       "http://127.0.0.1:%d%s" % (self.ngx.h2port, path)]
                if data:
                    cmd += ["--data-binary", "@-"]
                p = subprocess.run(cmd, input=data or b"",
                                   capture_output=True)
                self.assertIn(b"< HTTP/2 200", p.stderr)
                self.assertNotIn(b"grpc-", p.stderr.lower())
                self.assertNotIn(b"grpc", p.stdout)
                json.loads(p.stdout)

    # 3: health and metadata

    def test_health_and_metadata(self):
        for path, want in [
                ("/v2/health/live", {"live": True}),
                ("/v2/health/ready", {"ready": True}),
                ("/v2/models/simple/ready", {"ready": True}),
                ("/v2/models/simple/versions/1/ready", {"ready": True})]:
            with self.subTest(path=path):
                st, h, body = self.ngx.request("GET", path)
                self.assertEqual((st, h["content-type"]),
                                 (200, "application/json"))
                self.assertEqual(json.loads(body), want)

        st, _, body = self.ngx.request("GET", "/v2/")
        self.assertEqual(st, 200, body)
        doc = json.loads(body)
        self.assertEqual(doc["name"], "triton")
        self.assertIn("binary_tensor_data", doc["extensions"])

        st, _, body = self.ngx.request("GET", "/v2/models/simple/versions/1")
        self.assertEqual(st, 200, body)
        doc = json.loads(body)
        self.assertEqual((doc["name"], doc["versions"]), ("simple", ["1"]))
        self.assertEqual([i["name"] for i in doc["inputs"]],
                         ["INPUT0", "INPUT1"])
        self.assertEqual(doc["inputs"][0]["shape"], [1, 16])
        call = self.last()
        self.assertEqual(call["method"], "ModelMetadata")
        self.assertEqual((call["name"], call["version"]), ("simple", "1"))

        self.assertJSONError(self.ngx.request("GET", "/v2/models/nope"),
                             404, "unknown model")
        self.assertJSONError(self.ngx.request("GET", "/v2/models/nope/ready"),
                             404, "unknown model")
        self.assertJSONError(self.ngx.request("POST", "/v2/health/live",
                                              b"{}"), 405)
        self.assertJSONError(self.ngx.request(
            "GET", "/v2/models/simple/infer"), 405)
        self.assertJSONError(self.ngx.request("GET", "/v2/repository/index"),
                             404, "gRPC")
        # an infer path with a slash too many is named, not translated;
        # behind a rewrite, the path the client sent is the one named
        for path, canonical in [
                ("/v2/models/simple/infer/", "/v2/models/simple/infer"),
                ("/typed/v2/models/simple/infer/",
                 "/typed/v2/models/simple/infer")]:
            with self.subTest(path=path):
                self.assertJSONError(self.ngx.post(path, b"{}"), 404,
                                     'the infer path is "%s"' % canonical)

    def test_not_ready_is_503(self):
        self.rt.hook("PUT", "/_test/health", {"ready": False})
        for path, want in [
                ("/v2/health/live", {"live": True}),
                ("/v2/health/ready", {"ready": False}),
                ("/v2/models/simple/ready", {"ready": False})]:
            with self.subTest(path=path):
                st, h, body = self.ngx.request("GET", path)
                self.assertEqual(json.loads(body), want)
                self.assertEqual((st, h["content-type"]),
                                 (503 if False in want.values() else 200,
                                  "application/json"))
        self.rt.hook("PUT", "/_test/health", {"live": False})
        st, _, body = self.ngx.request("GET", "/v2/health/live")
        self.assertEqual((st, json.loads(body)), (503, {"live": False}))

    def test_metadata_malformed(self):
        self.rt.hook("PUT", "/_test/fault", {
            "mode": "malformed", "times": 1, "methods": ["ModelMetadata"]})
        self.assertJSONError(self.ngx.request("GET", "/v2/models/simple"),
                             502, "ModelMetadata")

    def test_signature_through_grpc(self):
        st, _, body = self.infer("simple", {"inputs": SIMPLE_IN},
                                 prefix="/sig")
        self.assertEqual(st, 200, body)
        methods = [c["method"] for c in self.rt.received()]
        self.assertIn("ModelMetadata", methods)
        bad = {"inputs": [{"name": "X", "shape": [1], "datatype": "INT32",
                           "data": [1]}]}
        self.assertJSONError(self.infer("simple", bad, prefix="/sig"), 400,
                             "its inputs: 'INPUT0', 'INPUT1'")
        self.assertJSONError(self.infer("nope2", {"inputs": SIMPLE_IN},
                                        prefix="/sig"), 404, "not found")
        # refused at the edge: no ModelInfer went for either
        methods = [c["method"] for c in self.rt.received()]
        self.assertEqual(methods.count("ModelInfer"), 1, methods)

    # 4: limits

    def test_max_message(self):
        req = {"inputs": [{"name": "INPUT0", "shape": [300],
                           "datatype": "INT32", "data": [7] * 300}]}
        self.assertJSONError(self.infer("identity", req, prefix="/small"),
                             413, "oip_grpc_max_message")
        self.assertEqual(self.rt.received(), [])

        # 5 MB: within the gateway's 64m, above the runtime's 4 MiB
        chunk = bytes(5 * 1024 * 1024)
        body, n = binary_body({"inputs": [
            {"name": "INPUT0", "shape": [len(chunk)], "datatype": "UINT8",
             "parameters": {"binary_data_size": len(chunk)}}]}, [chunk])
        self.assertJSONError(self.infer("identity", body, prefix="/big",
                                        headers={IHCL: str(n)}),
                             429, "larger than max")

    # what the module leaves alone

    def test_grpc_clients_pass(self):
        # a gRPC client's own call, in a location with oip on
        sys.path.insert(0, GrpcRuntime.STUBS)
        import grpc
        import grpc_predict_v2_pb2 as pb
        import grpc_predict_v2_pb2_grpc as pbg
        ch = grpc.insecure_channel("127.0.0.1:%d" % self.ngx.h2port)
        try:
            stub = pbg.GRPCInferenceServiceStub(ch)
            r = stub.ModelMetadata(pb.ModelMetadataRequest(name="simple"),
                                   timeout=10)
            self.assertEqual(r.name, "simple")
        finally:
            ch.close()

    def test_oip_off_location(self):
        # no translation where oip is off: the GET goes as it is, and
        # the gRPC server says what it thinks of it
        st, h, body = self.ngx.request("GET", "/off/v2/health/live")
        self.assertIn("grpc-status", h)
        self.assertNotIn(b"live", body)


if __name__ == "__main__":
    run_tests()
