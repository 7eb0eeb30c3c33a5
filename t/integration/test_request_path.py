#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""The request path through real nginx: conversion both ways with the
exact bytes the binary extension prescribes, keep mode, the example
runtime behind the gateway, body framings, redirects, untouched paths."""

import http.client
import json
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import (GatewayTestCase, IHCL, binary_body, free_port,
                     run_tests, split_binary)
from tensors import CASES, bits, dumps, pack


class RequestPath(GatewayTestCase):

    @classmethod
    def setUpGateway(cls):
        cls.rec = cls.start_recorder()
        cls.rt = cls.start_runtime("triton")
        cls.unmerged = free_port()
        cls.mls = cls.start_runtime("mlserver")
        cls.ov = cls.start_runtime("openvino")
        cls.ngx = cls.start_nginx("""
            client_max_body_size 64m;
            client_body_buffer_size 1m;

            location / {{
                oip on;
                oip_upstream_inputs binary;
                proxy_pass http://127.0.0.1:{rec}/;
            }}
            location /keep/ {{
                oip on;
                proxy_pass http://127.0.0.1:{rec}/;
            }}
            location /json/ {{
                oip on;
                oip_upstream_inputs json;
                proxy_pass http://127.0.0.1:{rec}/;
            }}
            location /off/ {{
                proxy_pass http://127.0.0.1:{rec}/;
            }}
            location /small/ {{
                client_body_buffer_size 1k;
                oip on;
                oip_upstream_inputs binary;
                proxy_pass http://127.0.0.1:{rec}/;
            }}
            location /redirect/ {{
                oip on;
                oip_upstream_inputs binary;
                try_files /nonexistent @up;
            }}
            location @up {{
                oip on;
                oip_upstream_inputs json;
                proxy_pass http://127.0.0.1:{rec};
            }}
            location /limits/ {{
                oip on;
                oip_max_json_size 2k;
                oip_max_tensor_size 64;
                oip_max_depth 8;
                proxy_pass http://127.0.0.1:{rec}/;
            }}
            location /triton/ {{
                oip on;
                oip_upstream_inputs binary;
                proxy_pass http://127.0.0.1:{rt}/;
            }}
            location /triton-keep/ {{
                oip on;
                proxy_pass http://127.0.0.1:{rt}/;
            }}
            location /unbuffered/ {{
                proxy_request_buffering off;
                oip on;
                oip_upstream_inputs binary;
                proxy_pass http://127.0.0.1:{rec}/;
            }}
            location /mlserver/ {{
                oip on;
                oip_upstream_inputs json;
                proxy_pass http://127.0.0.1:{mls}/;
            }}
            location /legacy/ {{
                # an infer path the operator rewrites to a legacy API
                oip on;
                rewrite ^/legacy/v2/models/([^/]+)/infer$ /predict/$1 break;
                proxy_pass http://127.0.0.1:{rec};
            }}
        """, http="""
    server {{
        listen 127.0.0.1:{unmerged};
        merge_slashes off;
        location / {{
            oip on;
            proxy_pass http://127.0.0.1:{rec};
        }}
    }}
""", rec=cls.rec.port, rt=cls.rt.port, mls=cls.mls.port,
            unmerged=cls.unmerged)

    def setUp(self):
        self.rec.clear()
        self.rec.answer = None

    # -------------------------------------------------- JSON -> binary

    def test_json_to_binary_every_datatype(self):
        for dt, values in CASES:
            with self.subTest(dt=dt):
                self.rec.clear()
                inp = {"name": "x", "shape": [len(values)],
                       "datatype": dt, "data": values}
                req = {"id": "r1", "inputs": [inp]}
                st, _, body = self.ngx.post("/v2/models/m/infer", dumps(req))
                self.assertEqual(st, 200, body)

                up = self.rec.last()
                chunk = pack(dt, values)
                want = dumps({"id": "r1", "inputs": [
                    {"name": "x", "shape": [len(values)], "datatype": dt,
                     "parameters": {"binary_data_size": len(chunk)}}]})
                self.assertEqual(up["headers"][IHCL.lower()],
                                 str(len(want)))
                self.assertEqual(up["headers"]["content-type"],
                                 "application/octet-stream")
                self.assertEqual(up["headers"]["content-length"],
                                 str(len(want) + len(chunk)))
                self.assertNotIn("transfer-encoding", up["headers"])
                self.assertEqual(up["body"][:len(want)], want)
                self.assertEqual(up["body"][len(want):], chunk)

    def test_nested_and_unconverted_fields_byte_exact(self):
        # spacing, unknown fields, big integers and parameters as sent
        req = (b'{ "id":"a\\u00e9", "parameters" : {"seq": 12345678901234567'
               b'890123, "flag":true},\n "inputs": [{"name":"in",\t"shape"'
               b':[2,2],"datatype":"INT16","data":[[1,2],[3,-4]],"x":{"y":'
               b'[null]}}], "outputs":[{"name":"o","parameters":{"binary_d'
               b'ata":true}}], "zz": 1.0e+00 }')
        st, _, body = self.ngx.post("/v2/models/m/infer", req)
        self.assertEqual(st, 200, body)
        up = self.rec.last()
        want = req.replace(b',"data":[[1,2],[3,-4]]',
                           b',"parameters":{"binary_data_size":8}')
        n = int(up["headers"][IHCL.lower()])
        self.assertEqual(up["body"][:n], want)
        self.assertEqual(up["body"][n:], struct.pack("<4h", 1, 2, 3, -4))

    def test_mixed_json_and_binary_inputs(self):
        a = pack("FP32", [1.5, 2.5])
        c = pack("BYTES", ["z"])
        header = {"inputs": [
            {"name": "a", "shape": [2], "datatype": "FP32",
             "parameters": {"binary_data_size": len(a)}},
            {"name": "b", "shape": [1], "datatype": "UINT16", "data": [7]},
            {"name": "c", "shape": [1], "datatype": "BYTES",
             "parameters": {"binary_data_size": len(c)}}]}
        body, n = binary_body(header, [a, c])
        st, _, out = self.ngx.post("/v2/models/m/infer", body,
                                   {IHCL: str(n)})
        self.assertEqual(st, 200, out)
        up = self.rec.last()
        doc, rest = split_binary(up["headers"], up["body"])
        self.assertEqual(doc["inputs"][1]["parameters"],
                         {"binary_data_size": 2})
        self.assertEqual(rest, a + struct.pack("<H", 7) + c)

    # -------------------------------------------------- binary -> JSON

    def test_binary_to_json_every_datatype(self):
        for dt, values in CASES:
            with self.subTest(dt=dt):
                self.rec.clear()
                chunk = pack(dt, values)
                header = {"inputs": [
                    {"name": "x", "shape": [len(values)], "datatype": dt,
                     "parameters": {"binary_data_size": len(chunk)}}]}
                body, n = binary_body(header, [chunk])
                st, _, out = self.ngx.post("/json/v2/models/m/infer", body,
                                           {IHCL: str(n)})
                self.assertEqual(st, 200, out)

                up = self.rec.last()
                self.assertNotIn(IHCL.lower(), up["headers"])
                self.assertEqual(up["headers"]["content-type"],
                                 "application/json")
                self.assertEqual(up["headers"]["content-length"],
                                 str(len(up["body"])))
                doc = json.loads(up["body"])
                inp = doc["inputs"][0]
                self.assertNotIn("parameters", inp)
                self.assertEqual(list(inp),
                                 ["name", "shape", "datatype", "data"])
                # the values read back to exactly the bytes sent
                self.assertEqual(bits(dt, inp["data"]), chunk)

    def test_binary_to_json_reaches_a_json_only_runtime(self):
        a = pack("INT32", list(range(16)))
        b = pack("INT32", [2] * 16)
        header = {"inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32",
             "parameters": {"binary_data_size": 64}},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32",
             "parameters": {"binary_data_size": 64}}]}
        body, n = binary_body(header, [a, b])

        # the runtime alone refuses the binary body
        direct = self.mls
        import http.client
        conn = http.client.HTTPConnection("127.0.0.1", direct.port)
        conn.request("POST", "/v2/models/simple/infer", body, {IHCL: str(n)})
        self.assertEqual(conn.getresponse().status, 422)
        conn.close()

        st, _, out = self.ngx.post("/mlserver/v2/models/simple/infer", body,
                                   {IHCL: str(n)})
        self.assertEqual(st, 200, out)
        doc = json.loads(out)
        res = {o["name"]: o["data"] for o in doc["outputs"]}
        self.assertEqual(res["OUTPUT0"], [i + 2 for i in range(16)])
        self.assertEqual(res["OUTPUT1"], [i - 2 for i in range(16)])

    # -------------------------------------------------- keep

    def test_keep_is_byte_exact(self):
        a = pack("FP32", [1.0, 2.0])
        header = {"inputs": [
            {"name": "a", "shape": [2], "datatype": "FP32",
             "parameters": {"binary_data_size": 8}},
            {"name": "b", "shape": [1], "datatype": "INT8", "data": [1]}]}
        body, n = binary_body(header, [a])
        st, _, out = self.ngx.post("/keep/v2/models/m/infer", body,
                                   {IHCL: str(n), "Content-Type": "x/y"})
        self.assertEqual(st, 200, out)
        up = self.rec.last()
        self.assertEqual(up["body"], body)
        self.assertEqual(up["headers"][IHCL.lower()], str(n))
        self.assertEqual(up["headers"]["content-type"], "x/y")

    def test_keep_still_validates(self):
        req = dumps({"inputs": [{"name": "a", "shape": [2],
                                 "datatype": "INT8", "data": [1]}]})
        resp = self.ngx.post("/keep/v2/models/m/infer", req)
        self.assertJSONError(resp, 400, "data has 1 elements")
        self.assertIsNone(self.rec.last())

    # -------------------------------------------------- the runtime

    def test_runtime_simple_through_binary_conversion(self):
        req = {"inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32",
             "data": [list(range(16))]},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32",
             "data": [1] * 16}]}
        st, _, out = self.ngx.post("/triton/v2/models/simple/infer",
                                   dumps(req))
        self.assertEqual(st, 200, out)
        doc = json.loads(out)
        res = {o["name"]: o["data"] for o in doc["outputs"]}
        self.assertEqual(res["OUTPUT0"], [i + 1 for i in range(16)])
        self.assertEqual(res["OUTPUT1"], [i - 1 for i in range(16)])

    def test_fp16_json_client_reaches_the_runtime(self):
        values = [0.5, -1.25, 65504.0, 2049.0]
        req = {"inputs": [{"name": "INPUT0", "shape": [4],
                           "datatype": "FP16", "data": values}],
               "outputs": [{"name": "OUTPUT0",
                            "parameters": {"binary_data": True}}]}

        # the runtime alone refuses FP16 as JSON, as Triton does
        import http.client
        conn = http.client.HTTPConnection("127.0.0.1", self.rt.port)
        conn.request("POST", "/v2/models/identity/infer", dumps(req))
        r = conn.getresponse()
        self.assertEqual(r.status, 400)
        self.assertIn("FP16", json.loads(r.read())["error"])
        conn.close()

        st, headers, out = self.ngx.post("/triton/v2/models/identity/infer",
                                         dumps(req))
        self.assertEqual(st, 200, out)
        doc, rest = split_binary(headers, out)
        self.assertEqual(doc["outputs"][0]["datatype"], "FP16")
        # 2049 rounds to even: 2048
        self.assertEqual(rest, pack("FP16", [0.5, -1.25, 65504.0, 2048.0]))

    def test_raw_binary_passes_through_under_keep(self):
        raw = pack("FP32", [1.5, -2.0, 3.25])
        st, headers, out = self.ngx.post(
            "/triton-keep/v2/models/identity_fp32/infer", raw, {IHCL: "0"})
        self.assertEqual(st, 200, out)
        doc, rest = split_binary(headers, out)
        self.assertEqual(doc["outputs"][0]["shape"], [3])
        self.assertEqual(rest, raw)

    # -------------------------------------------------- framings

    def test_unbuffered_location_still_converts(self):
        req = dumps({"inputs": [{"name": "x", "shape": [2],
                                 "datatype": "UINT16", "data": [1, 2]}]})
        st, out = self.ngx.curl("-X", "POST", "--data-binary", "@-",
                                "-H", "Transfer-Encoding: chunked",
                                "{base}/unbuffered/v2/models/m/infer",
                                data=req)
        self.assertEqual(st, 200, out)
        up = self.rec.last()
        doc, rest = split_binary(up["headers"], up["body"])
        self.assertEqual(rest, pack("UINT16", [1, 2]))
        self.assertEqual(up["headers"]["content-length"],
                         str(len(up["body"])))

    def test_chunked_body(self):
        req = dumps({"inputs": [{"name": "x", "shape": [3],
                                 "datatype": "INT32", "data": [1, 2, 3]}]})
        st, out = self.ngx.curl("-X", "POST", "--data-binary", "@-",
                                "-H", "Transfer-Encoding: chunked",
                                "{base}/v2/models/m/infer", data=req)
        self.assertEqual(st, 200, out)
        up = self.rec.last()
        self.assertNotIn("transfer-encoding", up["headers"])
        doc, rest = split_binary(up["headers"], up["body"])
        self.assertEqual(rest, pack("INT32", [1, 2, 3]))
        self.assertEqual(up["headers"]["content-length"],
                         str(len(up["body"])))

    def test_http2_body(self):
        req = dumps({"inputs": [{"name": "x", "shape": [2],
                                 "datatype": "FP64", "data": [0.1, -2]}]})
        st, out = self.ngx.curl("-X", "POST", "--data-binary", "@-",
                                "{base}/v2/models/m/infer", h2=True,
                                data=req)
        self.assertEqual(st, 200, out)
        up = self.rec.last()
        doc, rest = split_binary(up["headers"], up["body"])
        self.assertEqual(rest, pack("FP64", [0.1, -2.0]))

    def test_http2_errors_are_json(self):
        st, out = self.ngx.curl("-X", "POST", "--data-binary", "@-",
                                "{base}/v2/models/m/infer", h2=True,
                                data=b'{"inputs":[]}')
        self.assertEqual(st, 400)
        self.assertIn("must not be empty", json.loads(out)["error"])

    def test_temp_file_body(self):
        values = [i * 0.5 for i in range(20000)]
        req = dumps({"inputs": [{"name": "x", "shape": [len(values)],
                                 "datatype": "FP32", "data": values}]})
        self.assertGreater(len(req), 1024 * 16)
        st, _, out = self.ngx.post("/small/v2/models/m/infer", req)
        self.assertEqual(st, 200, out)
        up = self.rec.last()
        doc, rest = split_binary(up["headers"], up["body"])
        self.assertEqual(rest, pack("FP32", values))
        self.assertIn("buffered to a temporary file", self.ngx.log())

    def test_temp_file_binary_body_to_json(self):
        values = list(range(30000))
        chunk = pack("INT32", values)
        header = {"inputs": [{"name": "x", "shape": [30000],
                              "datatype": "INT32",
                              "parameters": {"binary_data_size": 120000}}]}
        body, n = binary_body(header, [chunk])
        st, _, out = self.ngx.post("/json/v2/models/m/infer", body,
                                   {IHCL: str(n)})
        self.assertEqual(st, 200, out)
        doc = json.loads(self.rec.last()["body"])
        self.assertEqual(doc["inputs"][0]["data"], values)

    def test_body_in_many_reads(self):
        # nginx reads such a body into one buffer but hands it on as one
        # buffer a read: the module takes them as one piece when they
        # follow each other, and copies them when they do not (the part
        # read with the headers is elsewhere)
        values = [i * 0.25 - 100 for i in range(6000)]
        req = dumps({"inputs": [{"name": "x", "shape": [len(values)],
                                 "datatype": "FP32", "data": values}]})
        for split_headers in (False, True):
            head = ("POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n"
                    "Content-Length: %d\r\nConnection: close\r\n\r\n"
                    % len(req)).encode()
            s = socket.create_connection(("127.0.0.1", self.ngx.port))
            first = 0 if split_headers else 300
            s.sendall(head + req[:first])
            for i in range(first, len(req), 9000):
                time.sleep(0.02)
                s.sendall(req[i:i + 9000])
            answer = b""
            while True:
                d = s.recv(65536)
                if not d:
                    break
                answer += d
            s.close()
            self.assertTrue(answer.startswith(b"HTTP/1.1 200"), answer)
            up = self.rec.last()
            doc, rest = split_binary(up["headers"], up["body"])
            self.assertEqual(rest, pack("FP32", values))
            self.assertEqual(doc["inputs"][0]["parameters"],
                             {"binary_data_size": 4 * len(values)})

    # -------------------------------------------------- redirects, paths

    def test_internal_redirect_converts_once(self):
        req = dumps({"inputs": [{"name": "x", "shape": [2],
                                 "datatype": "INT8", "data": [5, 6]}]})
        st, _, out = self.ngx.post("/redirect/v2/models/m/infer", req)
        self.assertEqual(st, 200, out)
        up = self.rec.last()
        # converted to binary in the first location, and not back to
        # JSON by @up's oip_upstream_inputs json
        self.assertIn(IHCL.lower(), up["headers"])
        doc, rest = split_binary(up["headers"], up["body"])
        self.assertEqual(rest, b"\x05\x06")

    def test_untouched_requests(self):
        junk = b'{"inputs": not json at all'
        cases = [
            ("POST", "/v2/models/m/infer/more", junk),
            ("POST", "/v2/models/m", junk),
            ("POST", "/v2/repository/index", junk),
            ("POST", "/v2/models/m/versions/infer", junk),
            ("PUT", "/v2/models/m/infer", junk),
            ("GET", "/v2/models/m/infer", None),
            ("POST", "/off/v2/models/m/infer", junk),
        ]
        for method, path, body in cases:
            with self.subTest(path=path, method=method):
                self.rec.clear()
                st, _, out = self.ngx.request(method, path, body)
                self.assertEqual(st, 200, out)
                if body is not None:
                    self.assertEqual(self.rec.last()["body"], body)

    def test_infer_paths_are_recognised(self):
        junk = b'{"inputs": []}'
        for path in ("/v2/models/m/infer", "/v2/models/m/versions/3/infer",
                     "/any/prefix/v2/models/m/infer",
                     "/v2/models/versions/infer"):
            with self.subTest(path=path):
                self.rec.clear()
                resp = self.ngx.post(path, junk)
                self.assertJSONError(resp, 400, "'inputs' must not be empty")
                self.assertIsNone(self.rec.last())

    def test_infer_path_lookalikes_are_refused(self):
        """A POST that is an infer path but for a slash too many, or only
        while its escapes stay undecoded, would reach a runtime that reads
        paths loosely unchecked: a JSON 404 naming the infer path."""
        junk = b'{"inputs": not json at all'
        slash = "it has a slash too many; the infer path is "
        for path, says in [
                ("/v2/models/m/infer/", slash + '"/v2/models/m/infer"'),
                ("/v2/models/m/infer//", slash + '"/v2/models/m/infer"'),
                ("/v2/models/m/versions/2/infer/",
                 slash + '"/v2/models/m/versions/2/infer"'),
                ("/v2/models/m/infer%2F", slash + '"/v2/models/m/infer"'),
                ("/v2/models/m/infer%2f?x=1", slash),
                ("/keep/v2/models/m/infer/",
                 slash + '"/keep/v2/models/m/infer"'),
                ("/v2/models/a%2Fb/infer",
                 '"/v2/models/a%2Fb/infer" is an infer path only while its '
                 'escapes stay undecoded; decoded, it is '
                 '"/v2/models/a/b/infer"'),
                ("/v2/models/m/versions/1%2Fx/infer/", "undecoded")]:
            with self.subTest(path=path):
                self.rec.clear()
                self.assertJSONError(self.ngx.post(path, junk), 404, says)
                self.assertIsNone(self.rec.last())

        # merge_slashes off: "//" reaches the module as it came
        for path in ("/v2//models/m/infer", "/v2/models//m/infer"):
            with self.subTest(path=path):
                self.rec.clear()
                self.assertJSONError(self.post_to(self.unmerged, path, junk),
                                     404, slash + '"/v2/models/m/infer"')
                self.assertIsNone(self.rec.last())

        # not POST, oip off, or a rewrite the operator made: passed on
        for method, path, body in [
                ("GET", "/v2/models/m/infer/", None),
                ("PUT", "/v2/models/m/infer/", junk),
                ("POST", "/off/v2/models/m/infer/", junk),
                ("POST", "/legacy/v2/models/m/infer", junk)]:
            with self.subTest(method=method, path=path):
                self.rec.clear()
                st, _, out = self.ngx.request(method, path, body)
                self.assertEqual(st, 200, out)
                self.assertIsNotNone(self.rec.last())

    @staticmethod
    def post_to(port, path, body):
        """(status, headers, body) of a POST to another port"""
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            conn.request("POST", path, body)
            r = conn.getresponse()
            return (r.status, {k.lower(): v for k, v in r.getheaders()},
                    r.read())
        finally:
            conn.close()

    def test_runtime_answers_lookalikes_as_triton(self):
        """The example runtime's Triton matches its routes on the raw
        path: "…/infer/" is a 404 {"error": "Not Found"}, not an infer;
        OVMS matches none of its routes (REST_INVALID_URL, a 400);
        MLServer's FastAPI redirects it."""
        self.assertJSONError(self.post_to(
            self.rt.port, "/v2/models/simple/infer/", b"{}"), 404,
            "Not Found")
        self.assertJSONError(self.post_to(
            self.ov.port, "/v2/models/simple/infer/", b"{}"), 400,
            "Invalid request URL")
        st, h, body = self.post_to(self.mls.port, "/v2/models/m/infer/?a=1",
                                   b"{}")
        self.assertEqual((st, body), (307, b""))
        self.assertTrue(h["location"].endswith("/v2/models/m/infer?a=1"))

    def test_upstream_answer_passes_through(self):
        self.rec.answer = (503, {"Content-Type": "application/json"},
                           b'{"error":"model not ready"}')
        req = dumps({"inputs": [{"name": "x", "shape": [1],
                                 "datatype": "INT8", "data": [1]}]})
        st, _, out = self.ngx.post("/v2/models/m/infer", req)
        self.assertEqual((st, out), (503, b'{"error":"model not ready"}'))


def bad(req):
    return req if isinstance(req, bytes) else dumps(req)


def inp(**kw):
    base = {"name": "x", "shape": [2], "datatype": "INT32", "data": [1, 2]}
    base.update(kw)
    return {"inputs": [{k: v for k, v in base.items() if v is not None}]}


class Validation(GatewayTestCase):
    """Each rule of SPEC 4.1 broken once: a JSON 4xx, upstream not hit."""

    @classmethod
    def setUpGateway(cls):
        cls.rec = cls.start_recorder()
        cls.ngx = cls.start_nginx("""
            client_max_body_size 64m;
            location / {{
                oip on;
                oip_upstream_inputs binary;
                oip_max_json_size 4k;
                oip_max_tensor_size 1k;
                oip_max_depth 12;
                proxy_pass http://127.0.0.1:{rec};
            }}
        """, rec=cls.rec.port)

    def check(self, body, status, contains, headers=None):
        self.rec.clear()
        resp = self.ngx.post("/v2/models/mymodel/infer", bad(body),
                             headers or {})
        self.assertJSONError(resp, status, contains)
        self.assertIsNone(self.rec.last(), "the upstream was reached")

    def test_rules(self):
        big = {"inputs": [{"name": "x", "shape": [300], "datatype": "FP32",
                           "data": [1.0] * 300}]}
        deep = b'{"inputs":[{"name":"x","shape":[1],"datatype":"INT8",' \
               b'"data":[1],"p":' + b"[" * 20 + b"]" * 20 + b"}]}"
        cases = [
            # JSON
            (b"", 400, "body is empty"),
            (b"{", 400, "invalid JSON"),
            (b'{"inputs":[],"inputs":[]}', 400, "duplicate key"),
            (b'{"inputs":"\xff"}', 400, "invalid UTF-8"),
            (b'{"inputs":[{"name":"x","shape":[1],"datatype":"FP32",'
             b'"data":[nan]}]}', 400, "invalid literal"),
            (deep, 400, "oip_max_depth"),
            # inputs
            ({"id": "a"}, 400, "'inputs' is missing"),
            ({"inputs": []}, 400, "must not be empty"),
            ({"inputs": [{"name": "x"}]}, 400, "'datatype' is missing"),
            (inp(name=None), 400, "'name' is missing"),
            (inp(name=""), 400, "must not be empty"),
            ({"inputs": inp()["inputs"] * 2}, 400, "appears twice"),
            (inp(datatype="FLOAT32"), 400, "unknown datatype"),
            (inp(shape=[-2]), 400, "shape dimension"),
            (inp(shape=[2 ** 62, 4]), 400, "overflows"),
            (inp(data=None), 400, "has no data"),
            (inp(parameters={"binary_data_size": 8}), 400,
             "more than one of"),
            # data
            (inp(data=[1]), 400, "data has 1 elements"),
            (inp(shape=[1, 2], data=[[1], [2]]), 400, "not nested"),
            (inp(data=[1, 2.5]), 400, "2.5 is not an integer"),
            (inp(data=[1, 2 ** 31]), 400, "out of range for INT32"),
            (inp(datatype="BOOL", data=[1, 0]), 400, "true or false"),
            (inp(datatype="FP16", data=[1, 1e6]), 400, "out of range"),
            (inp(datatype="BYTES", data=["a", 1]), 400, "expected a string"),
            # outputs and parameters
            (dict(inp(), outputs=[{"name": "o"}, {"name": "o"}]), 400,
             "appears twice"),
            (dict(inp(), outputs=[{"name": "o", "parameters":
                                   {"binary_data": "yes"}}]), 400,
             "binary_data must be a boolean"),
            (dict(inp(), parameters={"binary_data_output": 1}), 400,
             "binary_data_output must be a boolean"),
            (dict(inp(), parameters={"p": {"q": 1}}), 400,
             "must be a string, number or boolean"),
            # limits
            (big, 413, "oip_max_tensor_size"),
            (dict(inp(), pad="x" * 5000), 413, "oip_max_json_size"),
        ]
        for body, status, contains in cases:
            with self.subTest(body=bad(body)[:80]):
                self.check(body, status, contains)

    def test_binary_rules(self):
        hdr = {"inputs": [{"name": "x", "shape": [2], "datatype": "INT32",
                           "parameters": {"binary_data_size": 8}}]}
        body, n = binary_body(hdr, [b"\0" * 8])
        cases = [
            ({IHCL: str(n + 100)}, body, 400, "exceeds the body length"),
            ({IHCL: "+%d" % n}, body, 400, "decimal number"),
            ({IHCL: "%d %d" % (n // 10, n % 10)}, body, 400,
             "decimal number"),
            ({IHCL: "0%d" % n}, body, 400, "decimal number"),
            ({IHCL: "abc"}, body, 400, "decimal number"),
            ({IHCL: str(n)}, body + b"x", 400, "not claimed"),
            ({IHCL: str(n)}, body[:-1], 400, "runs past the end"),
            ({}, body, 400, "unexpected bytes after the JSON"),
            ({IHCL: "0"}, body, 400, "raw binary"),
            ({IHCL: str(n), "Content-Encoding": "br"}, body, 415,
             "Content-Encoding"),
        ]
        for headers, b, status, contains in cases:
            with self.subTest(headers=headers):
                self.check(b, status, contains, headers)

    def test_duplicated_ihcl(self):
        # http.client sends repeated headers when given a list of pairs
        import http.client
        hdr = {"inputs": [{"name": "x", "shape": [1], "datatype": "INT8",
                           "parameters": {"binary_data_size": 1}}]}
        body, n = binary_body(hdr, [b"\1"])
        conn = http.client.HTTPConnection("127.0.0.1", self.ngx.port)
        conn.putrequest("POST", "/v2/models/m/infer")
        conn.putheader(IHCL, str(n))
        conn.putheader(IHCL, str(n))
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        r = conn.getresponse()
        out = r.read()
        conn.close()
        self.assertEqual(r.status, 400)
        self.assertIn("more than once", json.loads(out)["error"])

    def test_errors_are_logged_with_the_model(self):
        self.check(inp(data=[1]), 400, "data has 1 elements")
        self.assertIn('oip: model "mymodel": input \'x\': data has 1',
                      self.ngx.log())


if __name__ == "__main__":
    run_tests()
