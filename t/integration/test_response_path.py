#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""The response path and raw binary through real nginx: behind every
runtime family, for every datatype, client form and requested output form,
the client gets exactly what SPEC 2's rule says, with the runtime's values.
Then the layouts real clients use, malformed answers, compressed bodies,
and what must stay untouched."""

import gzip
import http.client
import json
import math
import os
import struct
import sys
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import (GatewayTestCase, IHCL, binary_body, run_tests,
                     split_binary)
from tensors import CASES, dumps, pack

FAMILIES = ["triton", "kserve", "openvino", "mlserver"]

# name -> (outputs, request parameters, binary expected)
OUTPUT_FORMS = {
    "listed": ([{"name": "OUTPUT0"}], None, False),
    "listed+binary_data": (
        [{"name": "OUTPUT0", "parameters": {"binary_data": True}}], None,
        True),
    "listed+binary_data:false, binary_data_output": (
        [{"name": "OUTPUT0", "parameters": {"binary_data": False}}],
        {"binary_data_output": True}, False),
    "unlisted": (None, None, False),
    "unlisted+binary_data_output": (None, {"binary_data_output": True},
                                    True),
}


def upstream_cannot(family, dt, listed):
    """What no gateway can get from a runtime, as (status, error text):
    OVMS ignores binary_data_output when no output is listed, and its
    JSON writer refuses these types (docs/upstreams.md); MLServer's numpy
    codec has no BF16.  Their own errors reach the client."""
    if (family == "openvino" and not listed
            and dt in ("FP16", "BF16", "BOOL", "BYTES")):
        return 400, "not supported"
    if family == "mlserver" and dt == "BF16":
        return 500, "builtins.KeyError: 'BF16'"
    return None


def family_values(family, values):
    """MLServer reads JSON without NaN and Infinity (orjson): in front of
    it the round trips are of finite values; test_runtimes.py has the
    others."""
    if family != "mlserver":
        return values
    return [v for v in values
            if not (isinstance(v, float) and not math.isfinite(v))]


def family_conf(family, port):
    """The configuration docs/upstreams.md gives for each family."""
    form = "json" if family == "mlserver" else "binary"
    nonfinite = "refuse" if family == "mlserver" else "pass"
    conf = """
        location /%(f)s/ {{
            oip on;
            oip_upstream_inputs %(form)s;
            oip_upstream_outputs %(form)s;
            oip_upstream_nonfinite %(nf)s;
            proxy_pass http://127.0.0.1:%(port)d/;
        }}
    """ % {"f": family, "form": form, "port": port, "nf": nonfinite}
    for dt, _ in CASES:
        for outs in ("binary", "json"):
            conf += """
        location /%(f)s-raw-%(dt)s-%(outs)s/ {{
            oip on;
            oip_upstream_inputs %(form)s;
            oip_upstream_outputs %(form)s;
            oip_raw_input INPUT0 %(dt)s %(dims)s;
            oip_raw_outputs %(outs)s;
            oip_upstream_nonfinite %(nf)s;
            proxy_pass http://127.0.0.1:%(port)d/;
        }}
            """ % {"f": family, "form": form, "port": port, "dt": dt,
                   "dims": "1" if dt == "BYTES" else "-1", "outs": outs,
                   "nf": nonfinite}
    return conf


class Families(GatewayTestCase):
    """Every family x datatype x client form x requested output form."""

    @classmethod
    def setUpGateway(cls):
        conf = "client_max_body_size 64m;\n"
        for family in FAMILIES:
            rt = cls.start_runtime(family)
            conf += family_conf(family, rt.port)
        cls.ngx = cls.start_nginx(conf)

    def check_answer(self, st, headers, body, dt, values, binary, what):
        self.assertEqual(st, 200, "%s: %s" % (what, body[:300]))
        self.assertEqual(int(headers["content-length"]), len(body), what)
        doc, rest = split_binary(headers, body)
        out = doc["outputs"]
        self.assertEqual(len(out), 1, what)
        out = out[0]
        self.assertEqual((out["name"], out["datatype"]), ("OUTPUT0", dt),
                         what)
        chunk = pack(dt, values)
        if binary:
            self.assertEqual(headers["content-type"],
                             "application/octet-stream", what)
            self.assertIn(IHCL.lower(), headers, what)
            self.assertNotIn("data", out, what)
            # a runtime's own parameters stay (MLServer: content_type)
            self.assertEqual(out["parameters"]["binary_data_size"],
                             len(chunk), what)
            self.assertEqual(rest, chunk, what)
        else:
            self.assertEqual(headers["content-type"], "application/json",
                             what)
            self.assertNotIn(IHCL.lower(), headers, what)
            self.assertNotIn("binary_data_size",
                             out.get("parameters") or {}, what)
            self.assertEqual(rest, b"", what)
            self.assertEqual(pack(dt, out["data"]), chunk, what)

    def test_matrix(self):
        n = 0
        for family in FAMILIES:
            for dt, values in CASES:
                values = family_values(family, values)
                for form_name, (outputs, params, binary) in \
                        OUTPUT_FORMS.items():
                    for client in ("json", "binary"):
                        what = "%s %s %s client, %s" % (family, dt, client,
                                                        form_name)
                        inp = {"name": "INPUT0", "shape": [len(values)],
                               "datatype": dt}
                        headers = {}
                        chunks = []
                        if client == "json":
                            inp["data"] = values
                        else:
                            chunk = pack(dt, values)
                            inp["parameters"] = {
                                "binary_data_size": len(chunk)}
                            chunks.append(chunk)
                        req = {"inputs": [inp]}
                        if outputs is not None:
                            req["outputs"] = outputs
                        if params is not None:
                            req["parameters"] = params
                        body, hlen = binary_body(req, chunks)
                        if chunks:
                            headers[IHCL] = str(hlen)
                        st, h, out = self.ngx.post(
                            "/%s/v2/models/identity/infer" % family, body,
                            headers)
                        cannot = upstream_cannot(family, dt,
                                                 outputs is not None)
                        if cannot:
                            self.assertEqual(st, cannot[0], what)
                            self.assertIn(cannot[1],
                                          json.loads(out)["error"], what)
                        else:
                            self.check_answer(st, h, out, dt, values, binary,
                                              what)
                        n += 1
        self.assertEqual(n, len(FAMILIES) * len(CASES) * 5 * 2)

    def test_raw_clients(self):
        for family in FAMILIES:
            for dt, values in CASES:
                values = family_values(family, values)
                for outs in ("binary", "json"):
                    what = "%s raw %s, oip_raw_outputs %s" % (family, dt,
                                                              outs)
                    if dt == "BYTES":
                        values = values[:1]
                        raw = values[0].encode()
                    else:
                        raw = pack(dt, values)
                    st, h, out = self.ngx.post(
                        "/%s-raw-%s-%s/v2/models/identity/infer"
                        % (family, dt, outs), raw, {IHCL: "0"})
                    cannot = upstream_cannot(family, dt, False)
                    if cannot:
                        self.assertEqual(st, cannot[0], what)
                        continue
                    self.check_answer(st, h, out, dt, values,
                                      outs == "binary", what)

    def test_metadata_and_health_pass_through(self):
        for family in FAMILIES:
            st, _, body = self.ngx.request(
                "GET", "/%s/v2/models/simple" % family)
            self.assertEqual(st, 200)
            self.assertEqual(json.loads(body)["name"], "simple")
            st, _, body = self.ngx.request("GET",
                                           "/%s/v2/health/ready" % family)
            # KServe answers its pydantic model, the others nothing
            self.assertEqual((st, body), (200, b'{"ready": true}'
                                          if family == "kserve" else b""))


class Clients(GatewayTestCase):
    """Requests laid out as real clients lay them out work unmodified."""

    @classmethod
    def setUpGateway(cls):
        conf = ""
        for family in FAMILIES:
            rt = cls.start_runtime(family)
            conf += family_conf(family, rt.port)
        cls.ngx = cls.start_nginx(conf)

    def simple_inputs(self, binary):
        a = list(range(16))
        b = [3] * 16
        inputs, chunks = [], []
        for name, v in (("INPUT0", a), ("INPUT1", b)):
            inp = {"name": name, "shape": [1, 16], "datatype": "INT32"}
            if binary:
                inp["parameters"] = {"binary_data_size": 64}
                chunks.append(pack("INT32", v))
            else:
                inp["data"] = v
            inputs.append(inp)
        return inputs, chunks, a, b

    def check_simple(self, st, headers, body, a, b, binary):
        self.assertEqual(st, 200, body)
        doc, rest = split_binary(headers, body)
        res = {}
        for o in doc["outputs"]:
            if binary:
                size = o["parameters"]["binary_data_size"]
                res[o["name"]] = list(struct.unpack("<16i", rest[:size]))
                rest = rest[size:]
            else:
                res[o["name"]] = o["data"]
        self.assertEqual(res["OUTPUT0"], [x + y for x, y in zip(a, b)])
        self.assertEqual(res["OUTPUT1"], [x - y for x, y in zip(a, b)])

    def test_tritonclient_layout(self):
        # tritonclient.http: no Content-Type, binary_data on every output,
        # IHCL only when binary follows
        for family in FAMILIES:
            for binary_in in (True, False):
                with self.subTest(family=family, binary_in=binary_in):
                    inputs, chunks, a, b = self.simple_inputs(binary_in)
                    req = {"inputs": inputs, "outputs": [
                        {"name": "OUTPUT0",
                         "parameters": {"binary_data": True}},
                        {"name": "OUTPUT1",
                         "parameters": {"binary_data": True}}]}
                    body, n = binary_body(req, chunks)
                    headers = {IHCL: str(n)} if chunks else {}
                    st, h, out = self.ngx.post(
                        "/%s/v2/models/simple/infer" % family, body, headers)
                    self.check_simple(st, h, out, a, b, True)

    def test_kserve_client_layout(self):
        # the KServe client: octet-stream for binary, JSON otherwise
        for family in FAMILIES:
            for binary_in in (True, False):
                with self.subTest(family=family, binary_in=binary_in):
                    inputs, chunks, a, b = self.simple_inputs(binary_in)
                    req = {"id": "k1", "inputs": inputs}
                    body, n = binary_body(req, chunks)
                    headers = {"Content-Type": "application/octet-stream",
                               IHCL: str(n)} if chunks else \
                        {"Content-Type": "application/json"}
                    st, h, out = self.ngx.post(
                        "/%s/v2/models/simple/infer" % family, body, headers)
                    self.check_simple(st, h, out, a, b, False)
                    self.assertEqual(json.loads(out)["id"], "k1")


def answer(body, headers=None, status=200):
    h = {"Content-Type": "application/octet-stream"}
    h.update(headers or {})
    return lambda req: (status, h, body)


class Upstream(GatewayTestCase):
    """Malformed answers, compression, and what stays untouched."""

    @classmethod
    def setUpGateway(cls):
        cls.rec = cls.start_recorder()
        cls.rt = cls.start_runtime("triton")
        cls.ngx = cls.start_nginx("""
            location / {{
                oip on;
                oip_upstream_inputs binary;
                oip_upstream_outputs binary;
                oip_max_json_size 64k;
                oip_max_tensor_size 64k;
                proxy_pass http://127.0.0.1:{rec};
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
            location /rt/ {{
                oip on;
                oip_upstream_inputs binary;
                oip_upstream_outputs binary;
                proxy_pass http://127.0.0.1:{rt}/;
            }}
            location /errors-pass/ {{
                oip on;
                oip_upstream_errors pass;
                proxy_pass http://127.0.0.1:{rec}/;
            }}
            location /image/ {{
                oip on;
                oip_raw_input IMAGE UINT8 -1,3;
                proxy_pass http://127.0.0.1:{rec}/;
            }}
        """, rec=cls.rec.port, rt=cls.rt.port)

    def setUp(self):
        self.rec.clear()
        self.rec.answer = None

    REQ = dumps({"inputs": [{"name": "x", "shape": [2], "datatype": "INT16",
                             "data": [1, 2]}]})

    def good_answer(self):
        h = dumps({"model_name": "m", "outputs": [
            {"name": "y", "datatype": "INT16", "shape": [2],
             "parameters": {"binary_data_size": 4}}]})
        return h, struct.pack("<2h", 7, -7)

    def test_binary_answer_to_a_json_client(self):
        h, chunk = self.good_answer()
        self.rec.answer = answer(h + chunk, {IHCL: str(len(h))})
        st, headers, body = self.ngx.post("/v2/models/m/infer", self.REQ)
        self.assertEqual(st, 200, body)
        self.assertEqual(headers["content-type"], "application/json")
        self.assertEqual(json.loads(body)["outputs"][0]["data"], [7, -7])
        # the upstream was asked for binary, without Accept-Encoding
        up = self.rec.last()
        self.assertIn(b'"binary_data_output":true', up["body"])

    def test_malformed_answers_are_502(self):
        h, chunk = self.good_answer()
        bool_h = dumps({"outputs": [{"name": "b", "datatype": "BOOL",
                                     "shape": [2], "parameters":
                                     {"binary_data_size": 2}}]})
        cases = [
            ("IHCL past the end", h + chunk, {IHCL: str(len(h) + 99)}),
            ("sizes short", h + chunk[:2], {IHCL: str(len(h))}),
            ("sizes long", h + chunk + b"xx", {IHCL: str(len(h))}),
            ("bad JSON", b'{"outputs":[', {}),
            ("not JSON at all", b"<html>oops</html>", {}),
            ("BOOL byte 2", bool_h + b"\x01\x02", {IHCL: str(len(bool_h))}),
            ("bad IHCL", h + chunk, {IHCL: "abc"}),
            ("binary without IHCL", h + chunk, {}),
        ]
        for what, body, headers in cases:
            with self.subTest(what=what):
                self.rec.answer = answer(body, headers)
                resp = self.ngx.post("/v2/models/m/infer", self.REQ)
                err = self.assertJSONError(resp, 502, "upstream answer")
                self.assertIn('oip: model "m": upstream answer', self.ngx.log())

    def test_too_large_answer_is_502(self):
        big = dumps({"outputs": [{"name": "y", "datatype": "UINT8",
                                  "shape": [200000], "parameters":
                                  {"binary_data_size": 200000}}]})
        self.rec.answer = answer(big + b"\0" * 200000, {IHCL: str(len(big))})
        resp = self.ngx.post("/v2/models/m/infer", self.REQ)
        self.assertJSONError(resp, 502, "oip_max_json_size plus")

    ERRORS = [
        (400, "application/json", b'{"error":"bad input"}', None),
        (404, "text/plain", b"Not Found", "Not Found"),
        (500, "text/html", b"<h1>boom</h1>", "boom"),
        (503, "application/json", b'{"error":"not ready"}', None),
        (422, "application/json",
         b'{"detail":[{"loc":["body","inputs"],"msg":"field required",'
         b'"type":"value_error.missing"}]}',
         "field required (at body.inputs)")]

    def test_upstream_errors_in_the_protocols_shape(self):
        """oip_upstream_errors rewrite, the default: {"error": string}
        passes as it came; any other body says its message in that
        shape, the upstream's status and other headers kept."""
        for status, ctype, body, msg in self.ERRORS:
            with self.subTest(status=status):
                self.rec.answer = answer(body, {"Content-Type": ctype,
                                                "X-Up": "kept"}, status)
                resp = self.ngx.post("/v2/models/m/infer", self.REQ)
                st, h, out = resp
                self.assertEqual(h.get("x-up"), "kept")
                if msg is None:
                    self.assertEqual((st, out), (status, body))
                    self.assertEqual(h["content-type"], ctype)
                else:
                    self.assertEqual(self.assertJSONError(resp, status),
                                     msg)

    def test_upstream_errors_pass_untouched(self):
        """oip_upstream_errors pass: every error body as it came."""
        for status, ctype, body, msg in self.ERRORS:
            with self.subTest(status=status):
                self.rec.answer = answer(body, {"Content-Type": ctype},
                                         status)
                st, h, out = self.ngx.post("/errors-pass/v2/models/m/infer",
                                           self.REQ)
                self.assertEqual((st, out), (status, body))
                self.assertEqual(h["content-type"], ctype)

    def test_head_and_get_untouched(self):
        self.rec.answer = answer(b"", {"X-Up": "1"})
        st, h, out = self.ngx.request("HEAD", "/v2/models/m/infer")
        self.assertEqual(st, 200)
        self.assertEqual(self.rec.last()["method"], "HEAD")

    def test_accept_encoding(self):
        h, chunk = self.good_answer()
        self.rec.answer = answer(h + chunk, {IHCL: str(len(h))})
        self.ngx.post("/v2/models/m/infer", self.REQ,
                      {"Accept-Encoding": "gzip, deflate"})
        self.assertNotIn("accept-encoding", self.rec.last()["headers"])

        self.rec.answer = None
        self.ngx.post("/keep/v2/models/m/infer", self.REQ,
                      {"Accept-Encoding": "gzip"})
        self.assertEqual(self.rec.last()["headers"]["accept-encoding"],
                         "gzip")

    def test_accept_encoding_to_a_compressing_runtime(self):
        # the runtime compresses when asked; the gateway does not ask
        req = dumps({"inputs": [{"name": "INPUT0", "shape": [3],
                                 "datatype": "FP16", "data": [1, 2, 3]}]})
        st, h, out = self.ngx.post("/rt/v2/models/identity/infer", req,
                                   {"Accept-Encoding": "gzip"})
        self.assertEqual(st, 200, out)
        self.assertNotIn("content-encoding", h)
        self.assertEqual(json.loads(out)["outputs"][0]["data"],
                         [1.0, 2.0, 3.0])

    def test_upstream_compressing_anyway_passes(self):
        h, chunk = self.good_answer()
        z = gzip.compress(h + chunk)
        self.rec.answer = answer(z, {IHCL: str(len(h)),
                                     "Content-Encoding": "gzip"})
        st, headers, body = self.ngx.post("/v2/models/m/infer", self.REQ)
        self.assertEqual((st, body), (200, z))
        self.assertIn("compressed its answer", self.ngx.log())

    def test_gzip_and_deflate_bodies(self):
        for enc, comp in (("gzip", gzip.compress), ("deflate", zlib.compress),
                          ("GZIP", gzip.compress)):
            with self.subTest(enc=enc):
                self.rec.clear()
                st, _, out = self.ngx.post("/v2/models/m/infer",
                                           comp(self.REQ),
                                           {"Content-Encoding": enc})
                self.assertEqual(st, 200, out)
                up = self.rec.last()
                self.assertNotIn("content-encoding", up["headers"])
                doc, rest = split_binary(up["headers"], up["body"])
                self.assertEqual(rest, struct.pack("<2h", 1, 2))

    def test_compressed_binary_body_ihcl_counts_plain_bytes(self):
        hdr = {"inputs": [{"name": "x", "shape": [2], "datatype": "INT16",
                           "parameters": {"binary_data_size": 4}}]}
        body, n = binary_body(hdr, [struct.pack("<2h", 5, 6)])
        st, _, out = self.ngx.post("/json/v2/models/m/infer",
                                   gzip.compress(body),
                                   {"Content-Encoding": "gzip",
                                    IHCL: str(n)})
        self.assertEqual(st, 200, out)
        up = self.rec.last()
        self.assertEqual(json.loads(up["body"])["inputs"][0]["data"], [5, 6])
        self.assertNotIn("content-encoding", up["headers"])

    def test_compressed_keep_goes_plain(self):
        st, _, out = self.ngx.post("/keep/v2/models/m/infer",
                                   zlib.compress(self.REQ),
                                   {"Content-Encoding": "deflate"})
        self.assertEqual(st, 200, out)
        up = self.rec.last()
        self.assertEqual(up["body"], self.REQ)
        self.assertNotIn("content-encoding", up["headers"])
        self.assertEqual(up["headers"]["content-length"], str(len(self.REQ)))

    def test_bad_compression(self):
        cases = [
            ({"Content-Encoding": "br"}, self.REQ, 415, "Content-Encoding"),
            ({"Content-Encoding": "gzip, gzip"}, self.REQ, 415,
             "Content-Encoding"),
            ({"Content-Encoding": "gzip"}, self.REQ, 400,
             "cannot be decompressed"),
            ({"Content-Encoding": "deflate"},
             zlib.compress(self.REQ)[2:-4], 400, "cannot be decompressed"),
            ({"Content-Encoding": "gzip"}, gzip.compress(self.REQ)[:-12],
             400, "cut short"),
            ({"Content-Encoding": "gzip"}, gzip.compress(b" " * 300000),
             413, "decompressed body exceeds"),
        ]
        for headers, body, status, msg in cases:
            with self.subTest(headers=headers, status=status):
                self.rec.clear()
                resp = self.ngx.post("/v2/models/m/infer", body, headers)
                self.assertJSONError(resp, status, msg)
                self.assertIsNone(self.rec.last())

    def test_raw_image_deduces_the_dimension(self):
        self.rec.answer = answer(b'{"outputs":[]}', {}, 200)
        st, _, out = self.ngx.post("/image/v2/models/m/infer",
                                   bytes(range(12)), {IHCL: "0"})
        self.assertEqual(st, 200, out)
        doc, rest = split_binary(self.rec.last()["headers"],
                                 self.rec.last()["body"])
        self.assertEqual(doc["inputs"][0]["shape"], [4, 3])
        self.assertEqual(doc["inputs"][0]["name"], "IMAGE")
        self.assertEqual(rest, bytes(range(12)))

        resp = self.ngx.post("/image/v2/models/m/infer", bytes(13),
                             {IHCL: "0"})
        self.assertJSONError(resp, 400, "not a whole number")

    def test_raw_undeclared_is_refused_when_converting(self):
        resp = self.ngx.post("/v2/models/m/infer", b"\1\2\3\4", {IHCL: "0"})
        self.assertJSONError(resp, 400, "needs oip_raw_input")


if __name__ == "__main__":
    run_tests()
