#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""The JSON header's length carried in the Content-Type (issue 15):
Triton's SageMaker and Vertex AI endpoints take
application/vnd.{sagemaker,vertex-ai}-triton.binary+json;json-header-size=N
where custom headers cannot pass.  Real nginx in front of the example
runtime's HTTP port and its SageMaker and Vertex AI frontends, and of a
recorder that keeps each request's bytes.

1. A client's media type is read as its IHCL (both, and different: 400),
   and its binary answers come back in that media type.
2. oip_upstream_header_carrier tells the upstream the length its way,
   and the upstream's answers are read its way.
3. The same through a gRPC upstream, and over HTTP/2.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import (GatewayTestCase, IHCL, binary_body, free_port,
                     run_tests)
from tensors import pack

SM = "application/vnd.sagemaker-triton.binary+json"
VX = "application/vnd.vertex-ai-triton.binary+json"

VALUES = list(range(16))
ONES = [1] * 16


def simple_request(binary_out=True):
    """(body, header length): INPUT0 binary, INPUT1 JSON, as Triton's
    SageMaker test sends it; the outputs binary or JSON."""
    header = {"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32",
         "parameters": {"binary_data_size": 64}},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32",
         "data": ONES}],
        "outputs": [{"name": "OUTPUT0",
                     "parameters": {"binary_data": binary_out}},
                    {"name": "OUTPUT1",
                     "parameters": {"binary_data": binary_out}}]}
    return binary_body(header, [pack("INT32", VALUES)])


def carried(ctype):
    """The json-header-size a Content-Type carries, or None."""
    for part in ctype.split(";")[1:]:
        name, _, value = part.strip().partition("=")
        if name == "json-header-size":
            return int(value)
    return None


class Carriers(GatewayTestCase):

    @classmethod
    def setUpGateway(cls):
        cls.sm_port = free_port()
        cls.vx_port = free_port()
        cls.rt = cls.start_runtime("triton", [
            "--sagemaker-port", str(cls.sm_port),
            "--vertex-port", str(cls.vx_port)])
        cls.rec = cls.start_recorder()
        cls.grpc = cls.start_grpc_runtime()
        cls.ngx = cls.start_nginx("""
            location /v2/ {{
                oip on;
                proxy_pass http://127.0.0.1:{rt};
            }}
            location /raw/ {{
                oip on;
                oip_raw_input INPUT0 FP32 -1;
                rewrite ^/raw(/.*)$ $1 break;
                proxy_pass http://127.0.0.1:{rt};
            }}
            location /rec/ {{
                oip on;
                rewrite ^/rec(/.*)$ $1 break;
                proxy_pass http://127.0.0.1:{rec};
            }}
            location /rec-sm/ {{
                oip on;
                oip_upstream_header_carrier sagemaker;
                rewrite ^/rec-sm(/.*)$ $1 break;
                proxy_pass http://127.0.0.1:{rec};
            }}
            location /rec-vx/ {{
                oip on;
                oip_upstream_inputs binary;
                oip_upstream_header_carrier vertex;
                rewrite ^/rec-vx(/.*)$ $1 break;
                proxy_pass http://127.0.0.1:{rec};
            }}
            location /sm/ {{
                oip on;
                oip_upstream_header_carrier sagemaker;
                rewrite ^/sm(/.*)$ $1 break;
                proxy_pass http://127.0.0.1:{sm}/models/$oip_model/invoke;
            }}
            location /sm-binary/ {{
                oip on;
                oip_upstream_inputs binary;
                oip_upstream_outputs binary;
                oip_upstream_header_carrier sagemaker;
                rewrite ^/sm-binary(/.*)$ $1 break;
                proxy_pass http://127.0.0.1:{sm}/models/$oip_model/invoke;
            }}
            location /vx/ {{
                oip on;
                oip_upstream_header_carrier vertex;
                rewrite ^/vx(/.*)$ $1 break;
                proxy_set_header X-Vertex-Ai-Triton-Redirect
                                 v2/models/$oip_model/infer;
                # a variable: the path is exactly that, rewrite or not
                proxy_pass http://127.0.0.1:{vx}/predict$is_args$args;
            }}
            location /grpc/ {{
                oip on;
                oip_upstream_protocol grpc;
                rewrite ^/grpc(/.*)$ $1 break;
                grpc_pass grpc://127.0.0.1:{grpc};
            }}
        """, rt=cls.rt.port, rec=cls.rec.port, sm=cls.sm_port,
            vx=cls.vx_port, grpc=cls.grpc.port)

    def check_simple(self, headers, body, media=None):
        """The answer to simple_request(): its outputs right, its length
        where the client looks for it."""
        ctype = headers.get("content-type", "")
        if media:
            self.assertTrue(ctype.startswith(media + ";json-header-size="),
                            ctype)
            self.assertNotIn(IHCL.lower(), headers)
            n = carried(ctype)
        else:
            n = int(headers[IHCL.lower()])
        doc = json.loads(body[:n])
        outs = {o["name"]: o for o in doc["outputs"]}
        rest = body[n:]
        o0 = rest[:outs["OUTPUT0"]["parameters"]["binary_data_size"]]
        o1 = rest[len(o0):]
        self.assertEqual(o0, pack("INT32", [v + 1 for v in VALUES]))
        self.assertEqual(o1, pack("INT32", [v - 1 for v in VALUES]))

    # 1. clients that carry the length in the media type

    def test_sagemaker_client(self):
        body, n = simple_request()
        st, h, out = self.ngx.post(
            "/v2/models/simple/infer", body,
            {"Content-Type": "%s;json-header-size=%d" % (SM, n)})
        self.assertEqual(st, 200, out)
        self.check_simple(h, out, SM)

    def test_vertex_client(self):
        body, n = simple_request()
        st, h, out = self.ngx.post(
            "/v2/models/simple/infer", body,
            {"Content-Type": "%s;json-header-size=%d" % (VX, n)})
        self.assertEqual(st, 200, out)
        self.check_simple(h, out, VX)

    def test_client_json_answer_is_json(self):
        body, n = simple_request(binary_out=False)
        st, h, out = self.ngx.post(
            "/v2/models/simple/infer", body,
            {"Content-Type": "%s;json-header-size=%d" % (SM, n)})
        self.assertEqual(st, 200, out)
        self.assertEqual(h["content-type"], "application/json")
        self.assertNotIn(IHCL.lower(), h)
        doc = json.loads(out)
        self.assertEqual(doc["outputs"][0]["data"],
                         [v + 1 for v in VALUES])

    def test_client_media_type_without_size_is_json(self):
        doc = {"inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32",
             "data": VALUES},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32",
             "data": ONES}],
            "parameters": {"binary_data_output": True}}
        st, h, out = self.ngx.post("/v2/models/simple/infer",
                                   json.dumps(doc), {"Content-Type": SM})
        self.assertEqual(st, 200, out)
        self.check_simple(h, out, SM)

    def test_upstream_gets_the_length_as_an_ihcl(self):
        body, n = simple_request()
        self.rec.clear()
        st, _, out = self.ngx.post(
            "/rec/v2/models/simple/infer", body,
            {"Content-Type": "%s; json-header-size=%d" % (VX, n)})
        self.assertEqual(st, 200, out)
        got = self.rec.last()
        self.assertEqual(got["headers"][IHCL.lower()], str(n))
        self.assertEqual(got["headers"]["content-type"],
                         "application/octet-stream")
        self.assertEqual(got["body"], body)

    def test_both_lengths_the_same(self):
        body, n = simple_request()
        st, h, out = self.ngx.post(
            "/v2/models/simple/infer", body,
            {"Content-Type": "%s;json-header-size=%d" % (SM, n),
             IHCL: str(n)})
        self.assertEqual(st, 200, out)
        self.check_simple(h, out, SM)

    def test_both_lengths_differ(self):
        body, n = simple_request()
        self.assertJSONError(self.ngx.post(
            "/v2/models/simple/infer", body,
            {"Content-Type": "%s;json-header-size=%d" % (SM, n),
             IHCL: str(n - 1)}), 400, "differ")

    def test_bad_sizes(self):
        body, n = simple_request()
        for size in ("-%d" % n, "0%d" % n, "", "x", "%d;json-header-size=%d"
                     % (n, n), '"%d' % n):
            with self.subTest(size=size):
                self.assertJSONError(self.ngx.post(
                    "/v2/models/simple/infer", body,
                    {"Content-Type": "%s;json-header-size=%s" % (VX, size)}),
                    400, "json-header-size")

    def test_size_beyond_the_body(self):
        body, n = simple_request()
        self.assertJSONError(self.ngx.post(
            "/v2/models/simple/infer", body,
            {"Content-Type": "%s;json-header-size=%d" % (SM, len(body) + 1)}
        ), 400)

    def test_raw_client(self):
        data = pack("FP32", [1.5, 2.5, 3.5])
        st, h, out = self.ngx.post(
            "/raw/v2/models/identity/infer", data,
            {"Content-Type": "%s;json-header-size=0" % SM})
        self.assertEqual(st, 200, out)
        n = carried(h["content-type"])
        self.assertTrue(h["content-type"].startswith(SM + ";"))
        doc = json.loads(out[:n])
        self.assertEqual(doc["outputs"][0]["datatype"], "FP32")
        self.assertEqual(out[n:], data)

    def test_h2_client(self):
        body, n = simple_request()
        path = os.path.join(self.ngx.dir, "carrier-h2.bin")
        with open(path, "wb") as f:
            f.write(body)
        st, out = self.ngx.curl(
            "-D", "-", "-H", "Content-Type: %s;json-header-size=%d" % (VX, n),
            "--data-binary", "@" + path,
            "{base}/v2/models/simple/infer", h2=True)
        self.assertEqual(st, 200, out)
        head, _, rest = out.partition(b"\r\n\r\n")
        headers = {}
        for line in head.decode().split("\r\n")[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        self.check_simple(headers, rest, VX)

    # 2. upstreams that read the length in the media type

    def test_upstream_sagemaker_media_type(self):
        body, n = simple_request()
        self.rec.clear()
        self.rec.answer = None
        st, _, out = self.ngx.post("/rec-sm/v2/models/simple/infer", body,
                                   {IHCL: str(n)})
        self.assertEqual(st, 200, out)
        got = self.rec.last()
        self.assertNotIn(IHCL.lower(), got["headers"])
        self.assertEqual(got["headers"]["content-type"],
                         "%s;json-header-size=%d" % (SM, n))
        self.assertEqual(got["body"], body)

    def test_upstream_json_request_is_json(self):
        doc = {"inputs": [{"name": "INPUT0", "shape": [2],
                           "datatype": "FP32", "data": [1, 2]}]}
        self.rec.clear()
        st, _, out = self.ngx.post("/rec-sm/v2/models/m/infer",
                                   json.dumps(doc))
        self.assertEqual(st, 200, out)
        got = self.rec.last()
        self.assertNotIn(IHCL.lower(), got["headers"])
        self.assertEqual(got["headers"]["content-type"], "application/json")

    def test_upstream_vertex_converted_body(self):
        doc = {"inputs": [{"name": "INPUT0", "shape": [2],
                           "datatype": "FP32", "data": [1, 2]}]}
        self.rec.clear()
        st, _, out = self.ngx.post("/rec-vx/v2/models/m/infer",
                                   json.dumps(doc))
        self.assertEqual(st, 200, out)
        got = self.rec.last()
        self.assertNotIn(IHCL.lower(), got["headers"])
        n = carried(got["headers"]["content-type"])
        self.assertTrue(got["headers"]["content-type"].startswith(VX + ";"))
        self.assertEqual(json.loads(got["body"][:n])["inputs"][0]
                         ["parameters"]["binary_data_size"], 8)
        self.assertEqual(got["body"][n:], pack("FP32", [1, 2]))

    def test_triton_sagemaker_frontend(self):
        """Through Triton's SageMaker frontend: it reads only the media
        type and answers binary in it; the client gets an IHCL."""
        body, n = simple_request()
        st, h, out = self.ngx.post("/sm/v2/models/simple/infer", body,
                                   {IHCL: str(n),
                                    "Content-Type": "application/"
                                                    "octet-stream"})
        self.assertEqual(st, 200, out)
        self.assertEqual(h["content-type"], "application/octet-stream")
        self.check_simple(h, out)

    def test_triton_sagemaker_frontend_json_client(self):
        doc = {"inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32",
             "data": VALUES},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32",
             "data": ONES}]}
        st, h, out = self.ngx.post("/sm-binary/v2/models/simple/infer",
                                   json.dumps(doc))
        self.assertEqual(st, 200, out)
        self.assertEqual(h["content-type"], "application/json")
        got = json.loads(out)
        self.assertEqual(got["outputs"][0]["data"], [v + 1 for v in VALUES])

    def test_sagemaker_both_ways(self):
        body, n = simple_request()
        st, h, out = self.ngx.post(
            "/sm/v2/models/simple/infer", body,
            {"Content-Type": "%s;json-header-size=%d" % (SM, n)})
        self.assertEqual(st, 200, out)
        self.check_simple(h, out, SM)

    def test_triton_vertex_frontend(self):
        body, n = simple_request()
        st, h, out = self.ngx.post("/vx/v2/models/simple/infer", body,
                                   {IHCL: str(n)})
        self.assertEqual(st, 200, out)
        self.check_simple(h, out)
        st, h, out = self.ngx.post(
            "/vx/v2/models/simple/infer", body,
            {"Content-Type": "%s;json-header-size=%d" % (SM, n)})
        self.assertEqual(st, 200, out)
        self.check_simple(h, out, SM)

    def test_answer_lengths_differ(self):
        header = json.dumps({"model_name": "m", "outputs": [
            {"name": "o", "datatype": "UINT8", "shape": [2],
             "parameters": {"binary_data_size": 2}}]}).encode()
        self.rec.answer = (200, {"Content-Type": "%s;json-header-size=%d"
                                 % (SM, len(header)),
                                 IHCL: str(len(header) + 1)},
                           header + b"\x01\x02")
        doc = {"inputs": [{"name": "INPUT0", "shape": [2],
                           "datatype": "FP32", "data": [1, 2]}],
               "outputs": [{"name": "o"}]}
        try:
            self.assertJSONError(self.ngx.post(
                "/rec-sm/v2/models/m/infer", json.dumps(doc)), 502,
                "differ")
        finally:
            self.rec.answer = None

    def test_answer_in_media_type_to_a_json_client(self):
        header = json.dumps({"model_name": "m", "outputs": [
            {"name": "o", "datatype": "UINT8", "shape": [2],
             "parameters": {"binary_data_size": 2}}]}).encode()
        self.rec.answer = (200, {"Content-Type": "%s;json-header-size=%d"
                                 % (VX, len(header))},
                           header + b"\x01\x02")
        doc = {"inputs": [{"name": "INPUT0", "shape": [2],
                           "datatype": "FP32", "data": [1, 2]}],
               "outputs": [{"name": "o"}]}
        try:
            st, h, out = self.ngx.post("/rec-vx/v2/models/m/infer",
                                       json.dumps(doc))
        finally:
            self.rec.answer = None
        self.assertEqual(st, 200, out)
        self.assertEqual(h["content-type"], "application/json")
        self.assertEqual(json.loads(out)["outputs"][0]["data"], [1, 2])

    # 3. through a gRPC upstream

    def test_grpc_upstream(self):
        body, n = simple_request()
        st, h, out = self.ngx.post(
            "/grpc/v2/models/simple/infer", body,
            {"Content-Type": "%s;json-header-size=%d" % (SM, n)})
        self.assertEqual(st, 200, out)
        self.check_simple(h, out, SM)


if __name__ == "__main__":
    run_tests()
