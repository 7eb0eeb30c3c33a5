#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""generate and generate_stream (issue 31), through real nginx:

1. oip_generate native: passed to a runtime that has them (the example
   runtime's Triton family, which maps them as Triton's HTTP front
   does), generate_stream's events unbuffered.
2. oip_generate emulate, from the model's signature: over HTTP (an
   infer call to /infer, in front of Triton's and KServe's families)
   and over gRPC (ModelInfer; ModelStreamInfer for generate_stream of a
   decoupled model): the emulated answer is the runtime's native one;
   Triton's mapping rule by rule (keys in "parameters" that are inputs,
   scalars, arrays, -1 dimensions, unwrapped outputs, id, parameters);
   misfits refused before the runtime; versions.
3. emulate without oip_signatures is refused at start.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import MODULE, GatewayTestCase, run_tests
from test_examples import nginx_t
from test_signatures import Hooks
from test_stream import read_events

META = """
            location /_meta{name}/ {{{{
                internal;
                proxy_pass http://127.0.0.1:{{{port}}}/;
                proxy_pass_request_body off;
                proxy_pass_request_headers off;
                proxy_set_header Content-Length "";
                subrequest_output_buffer_size 64k;
            }}}}"""


class Generate(GatewayTestCase):

    @classmethod
    def setUpGateway(cls):
        cls.triton = cls.start_runtime("triton")
        cls.kserve = cls.start_runtime("kserve")
        cls.grpc = cls.start_grpc_runtime()
        cls.ngx = cls.start_nginx("""
            location /native/ {{
                oip on;
                rewrite ^/native(/.*)$ $1 break;
                proxy_pass http://127.0.0.1:{triton};
            }}
            location /emu/ {{
                oip on;
                oip_generate emulate;
                oip_signatures /_metat zone=models;
                rewrite ^/emu(/.*)$ $1 break;
                proxy_pass http://127.0.0.1:{triton};
            }}
            location /kserve/ {{
                oip on;
                oip_generate emulate;
                oip_upstream_inputs json;
                oip_signatures /_metak zone=models;
                rewrite ^/kserve(/.*)$ $1 break;
                proxy_pass http://127.0.0.1:{kserve};
            }}
            location /grpc/ {{
                oip on;
                oip_upstream_protocol grpc;
                oip_generate emulate;
                oip_signatures /_metag zone=models;
                rewrite ^/grpc(/.*)$ $1 break;
                grpc_pass grpc://127.0.0.1:{g};
            }}
            location /grpcnative/ {{
                oip on;
                oip_upstream_protocol grpc;
                rewrite ^/grpcnative(/.*)$ $1 break;
                grpc_pass grpc://127.0.0.1:{g};
            }}
            location /_metag/ {{
                internal;
                oip_upstream_protocol grpc;
                rewrite ^/_metag(/.*)$ $1 break;
                grpc_pass grpc://127.0.0.1:{g};
            }}
        """ + META.format(name="t", port="triton")
            + META.format(name="k", port="kserve"),
            http="oip_signature_zone zone=models:1m;",
            triton=cls.triton.port, kserve=cls.kserve.port,
            g=cls.grpc.port)
        cls.th = Hooks(cls.triton.port)
        cls.kh = Hooks(cls.kserve.port)

    def setUp(self):
        for h in (self.th, self.kh):
            h.call("POST", "reset")
        self.grpc.hook("POST", "/_test/reset")

    def post(self, path, doc):
        st, h, out = self.ngx.post(path, doc if isinstance(doc, str)
                                   else json.dumps(doc))
        return st, h, out

    def direct(self, path, doc):
        """The example runtime's own (Triton's) generate."""
        import http.client
        conn = http.client.HTTPConnection("127.0.0.1", self.triton.port,
                                          timeout=10)
        try:
            conn.request("POST", path, body=json.dumps(doc),
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    # 1. native

    def test_native_passes(self):
        doc = {"INPUT0": [1.5, 2.5], "id": "n1"}
        st, _, out = self.post("/native/v2/models/identity_fp32/generate",
                               doc)
        self.assertEqual(st, 200, out)
        self.assertEqual(json.loads(out), {
            "OUTPUT0": [1.5, 2.5], "id": "n1", "model_name": "identity_fp32",
            "model_version": "1"})
        self.assertEqual(self.th.counts()["generate"], {"identity_fp32": 1})
        st, out = self.ngx.curl("-N", "-H", "Content-Type: application/json",
                                "-d", json.dumps(doc), "{base}/native/v2/"
                                "models/identity_fp32/generate_stream")
        self.assertEqual(st, 200, out)
        self.assertEqual(out, b'data: {"OUTPUT0":[1.5,2.5],"id":"n1",'
                         b'"model_name":"identity_fp32","model_version":'
                         b'"1"}\n\n')
        self.assertEqual(self.th.counts()["generate"], {"identity_fp32": 2})

    def test_native_over_grpc_is_no_path(self):
        st, _, out = self.post("/grpcnative/v2/models/identity_fp32/"
                               "generate", {"INPUT0": [1]})
        self.assertEqual(st, 404, out)
        self.assertIn("error", json.loads(out))

    # 2. emulated

    def test_emulated_as_native(self):
        """The emulated answer is what Triton's own generate answers; the
        runtime's generate is never called, its /infer is."""
        cases = [
            ("identity_fp32", {"INPUT0": [1.5, 2.5], "id": "e1"}),
            ("identity_fp32", {"parameters": {"INPUT0": 3}}),
            ("identity_fp32", {"INPUT0": 7, "temperature": 0.5,
                               "stream": False}),
            ("identity_fp32", {"INPUT0": [[1], [2]]}),
            ("identity_bytes", {"INPUT0": "hello"}),
            ("simple", {"INPUT0": list(range(16)), "INPUT1": [1] * 16}),
        ]
        for model, doc in cases:
            with self.subTest(model=model, doc=doc):
                st, want = self.direct("/v2/models/%s/generate" % model, doc)
                self.assertEqual(st, 200, want)
                st, _, got = self.post("/emu/v2/models/%s/generate" % model,
                                       doc)
                self.assertEqual(st, 200, got)
                self.assertEqual(json.loads(got), json.loads(want))
                # byte order of the keys, as Triton's std::map writes them
                keys = list(json.loads(got))
                self.assertEqual(keys, sorted(keys))
        self.assertEqual(self.th.counts()["generate"],
                         {m: 1 for m in ("identity_fp32", "identity_bytes",
                                         "simple")}
                         | {"identity_fp32": 4})
        self.assertEqual(self.th.infer("identity_fp32"), 4)

    def test_emulated_stream_over_http(self):
        """generate_stream emulated by /infer: its one answer, one event."""
        conn_path = "/emu/v2/models/identity_fp32/generate_stream"
        st, out = self.ngx.curl("-N", "-d", json.dumps({"INPUT0": [2]}),
                                "{base}" + conn_path)
        self.assertEqual(st, 200, out)
        self.assertEqual(out, b'data: {"OUTPUT0":2.0,"model_name":'
                         b'"identity_fp32","model_version":"1"}\n\n')

    def test_kserve(self):
        st, _, out = self.post("/kserve/v2/models/identity_fp32/generate",
                               {"INPUT0": [0.5, 1]})
        self.assertEqual(st, 200, out)
        doc = json.loads(out)
        self.assertEqual(doc["OUTPUT0"], [0.5, 1.0])
        self.assertEqual(doc["model_name"], "identity_fp32")
        self.assertEqual(self.kh.infer("identity_fp32"), 1)
        # generate_stream: KServe's one answer, one event
        st, out = self.ngx.curl("-N", "-d", json.dumps({"INPUT0": 3}),
                                "{base}/kserve/v2/models/identity_fp32/"
                                "generate_stream")
        self.assertEqual(st, 200, out)
        self.assertTrue(out.startswith(b"data: {") and out.endswith(b"\n\n")
                        and out.count(b"data: ") == 1, out)
        self.assertEqual(json.loads(out[6:])["OUTPUT0"], 3.0)

    def test_grpc(self):
        st, _, out = self.post("/grpc/v2/models/identity_fp32/generate",
                               {"INPUT0": [1.5, 2.5], "id": "g1",
                                "temperature": 0.25, "top_k": 4,
                                "greedy": True, "prompt_name": "p"})
        self.assertEqual(st, 200, out)
        self.assertEqual(json.loads(out), {
            "OUTPUT0": [1.5, 2.5], "id": "g1",
            "model_name": "identity_fp32", "model_version": "1"})
        call = self.grpc.received()[-1]
        self.assertEqual(call["method"], "ModelInfer")
        self.assertEqual(call["id"], "g1")
        self.assertEqual(call["inputs"][0]["shape"], [2])
        # every other key a request parameter, typed; id one as well
        self.assertEqual(call["parameters"], {
            "id": {"kind": "string_param", "value": "g1"},
            "temperature": {"kind": "double_param", "value": 0.25},
            "top_k": {"kind": "int64_param", "value": 4},
            "greedy": {"kind": "bool_param", "value": True},
            "prompt_name": {"kind": "string_param", "value": "p"}})

    def test_grpc_stream_of_a_decoupled_model(self):
        self.grpc.hook("PUT", "/_test/decoupled/identity_fp32",
                       {"responses": 3})
        st, out = self.ngx.curl("-N", "-d", json.dumps({"INPUT0": [4]}),
                                "{base}/grpc/v2/models/identity_fp32/"
                                "generate_stream")
        self.assertEqual(st, 200, out)
        evs = [json.loads(e[len(b"data: "):])
               for e in out.split(b"\n\n") if e]
        self.assertEqual([(e["INDEX"], e["OUTPUT0"],
                           e["triton_final_response"]) for e in evs],
                         [(0, 4.0, False), (1, 4.0, False), (2, 4.0, True)])
        # generate of a decoupled model: Triton's UNIMPLEMENTED
        st, _, out = self.post("/grpc/v2/models/identity_fp32/generate",
                               {"INPUT0": [4]})
        self.assertEqual(st, 501, out)

    def test_shapes(self):
        """Fixed dimensions divide the count, the innermost -1 takes the
        rest, other -1 are 1 (a batching model's first -1)."""
        for name, shape, values, want in [
                ("g_fixed", [-1, 2], [1, 2, 3, 4], [2, 2]),
                ("g_two", [-1, -1], [1, 2, 3], [1, 3]),
                ("g_batch", [-1, 3], [1, 2, 3], [1, 3]),
                ("g_flat", [4], [1, 2, 3, 4], [4])]:
            with self.subTest(name=name):
                self.grpc.hook("PUT", "/_test/models/" + name, {
                    "inputs": [{"name": "X", "datatype": "INT32",
                                "shape": shape}],
                    "outputs": [{"name": "X", "datatype": "INT32",
                                 "shape": shape}]})
                st, _, out = self.post("/grpc/v2/models/%s/generate" % name,
                                       {"X": values})
                self.assertEqual(st, 200, out)
                self.assertEqual(json.loads(out)["X"], values)
                self.assertEqual(self.grpc.received()[-1]["inputs"][0]
                                 ["shape"], want)

    def test_misfits_refused_before_the_runtime(self):
        self.th.call("PUT", "models/g_two_in", {
            "inputs": [{"name": "A", "datatype": "INT32", "shape": [-1]},
                       {"name": "B", "datatype": "BYTES", "shape": [1]}],
            "outputs": [{"name": "A", "datatype": "INT32", "shape": [-1]}]})
        for doc, status, words in [
                ({"A": [1, 2], "B": 5}, 400, "generate: input 'B' of model "
                 "'g_two_in' is BYTES: each value must be a string"),
                ({"A": [1.5], "B": "x"}, 400, "generate: input 'A' of model "
                 "'g_two_in' is INT32: each value must be an integer"),
                ({"A": [[1, 2]], "B": "x"}, 400, "generate: input 'A' has 2 "
                 "values in an array of 1"),
                ({"A": [1], "B": ["x", "y"]}, 400, "generate: input 'B' of "
                 "model 'g_two_in' cannot take 2 values: its shape is [1]"),
                ({"A": [1]}, 400, "'B'"),
                ({"A": [1], "B": "x", "opts": {"k": 1}}, 400,
                 "parameter 'opts' has invalid type. It should be either "
                 "'int', 'bool', or 'string'."),
                ({"A": [1], "B": "x", "parameters": [1]}, 400,
                 "generate: 'parameters' must be a JSON object"),
                ({"A": [1], "B": "x", "id": 5}, 400,
                 "generate: 'id' must be a string"),
                ("[1]", 400, "generate request is a JSON object"),
                ("{", 400, None)]:
            with self.subTest(doc=doc):
                st, _, out = self.post("/emu/v2/models/g_two_in/generate",
                                       doc)
                self.assertEqual(st, status, out)
                err = json.loads(out)["error"]
                if words:
                    self.assertIn(words, err)
        self.assertEqual(self.th.infer("g_two_in"), 0)
        st, _, out = self.post("/emu/v2/models/g_two_in/generate",
                               {"parameters": {"A": [1, 2], "B": "x"}})
        self.assertEqual(st, 200, out)
        self.assertEqual(json.loads(out)["A"], [1, 2])

    def test_versions_and_unknown_models(self):
        st, _, out = self.post("/emu/v2/models/identity_fp32/versions/1/"
                               "generate", {"INPUT0": [1]})
        self.assertEqual(st, 200, out)
        self.assertEqual(json.loads(out)["OUTPUT0"], 1.0)
        st, _, out = self.post("/emu/v2/models/nosuch/generate",
                               {"INPUT0": [1]})
        self.assertEqual(st, 404, out)

    def test_emulate_needs_signatures(self):
        conf = ("load_module %s;\nevents {}\nhttp { server { listen "
                "127.0.0.1:1; location / { oip on; oip_generate emulate; "
                "proxy_pass http://127.0.0.1:1; } } }\n" % MODULE)
        rc, err = nginx_t(conf)
        self.assertNotEqual(rc, 0)
        self.assertIn('"oip_generate emulate" needs oip_signatures', err)


if __name__ == "__main__":
    run_tests()
