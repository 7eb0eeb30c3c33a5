#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""Runtimes as they really answer and clients as they really ask, through
real nginx in front of the example runtime's families (which imitate
KServe 0.15, MLServer 1.3 and Triton as their sources show them): one
test per item of the issue that found them, each failing on the code
before it.

1. KServe's JSON answers, with "parameters": null on every output.
2. KServe's request model, with null for every optional member.
3. NaN and Infinity towards a runtime that reads plain JSON.
4. Error answers that are not {"error": string}.
5. Outputs the client did not ask for.
6. GET /v2 through the documented configurations: test_examples.py.
7. The demo's FP16 round trip: test_examples.py.
8. A request within oip_max_json_size, made binary.

And the request matrix tritonclient sends, with an output the client did
not list, in front of every family; and each family's word when it
closes a connection, which a keepalive pool in front reads.
"""

import gzip
import json
import math
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import (GatewayTestCase, IHCL, binary_body, run_tests,
                     split_binary)
from tensors import CASES, dumps, pack

FAMILIES = ["triton", "kserve", "openvino", "mlserver"]

SIMPLE_IN = [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32",
     "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32",
     "data": [1] * 16}]
SIMPLE_SUM = [x + 1 for x in range(16)]
SIMPLE_DIFF = [x - 1 for x in range(16)]


def family_conf(family, port):
    """The configuration docs/upstreams.md gives for the family."""
    if family == "mlserver":
        extra = """
            oip_upstream_inputs json;
            oip_upstream_outputs json;
            oip_upstream_nonfinite refuse;"""
    else:
        extra = """
            oip_upstream_inputs binary;
            oip_upstream_outputs binary;"""
    return """
        location /%(f)s/ {{
            oip on;%(extra)s
            proxy_pass http://127.0.0.1:%(port)d/;
        }}
        location /%(f)s-keep/ {{
            oip on;
            proxy_pass http://127.0.0.1:%(port)d/;
        }}
    """ % {"f": family, "port": port, "extra": extra}


class Runtimes(GatewayTestCase):

    @classmethod
    def setUpGateway(cls):
        cls.rec = cls.start_recorder()
        conf = """
            client_max_body_size 64m;
            location /readme/ {{
                oip on;
                oip_upstream_inputs binary;
                proxy_pass http://127.0.0.1:{kserve}/;
            }}
            location /mlserver-pass/ {{
                oip on;
                oip_upstream_inputs json;
                proxy_pass http://127.0.0.1:{mlserver}/;
            }}
            location /kserve-raw/ {{
                oip on;
                oip_raw_input INPUT0 FP32 -1;
                proxy_pass http://127.0.0.1:{kserve}/;
            }}
            location /small/ {{
                oip on;
                oip_upstream_inputs binary;
                oip_max_json_size 1k;
                proxy_pass http://127.0.0.1:{rec}/;
            }}
        """
        ports = {"rec": cls.rec.port}
        for family in FAMILIES:
            rt = cls.start_runtime(family)
            ports[family] = rt.port
            conf += family_conf(family, rt.port)
        cls.ports = ports
        cls.ngx = cls.start_nginx(conf, **ports)

    def infer(self, prefix, model, doc, chunks=(), headers=None):
        body, n = binary_body(doc, chunks)
        h = dict(headers or {})
        if chunks:
            h[IHCL] = str(n)
        return self.ngx.post("/%s/v2/models/%s/infer" % (prefix, model),
                             body, h)

    def outputs(self, resp):
        """name -> values, whatever form each output came in."""
        st, headers, body = resp
        self.assertEqual(st, 200, body[:300])
        doc, rest = split_binary(headers, body)
        out, pos = {}, 0
        for o in doc["outputs"]:
            size = (o.get("parameters") or {}).get("binary_data_size")
            if size is None:
                out[o["name"]] = o["data"]
            else:
                raw = rest[pos:pos + size]
                pos += size
                out[o["name"]] = list(raw) if o["datatype"] == "BOOL" else \
                    [int.from_bytes(raw[i:i + 4], "little", signed=True)
                     for i in range(0, len(raw), 4)]
        self.assertEqual(pos, len(rest))
        return doc, out

    def test_closing_said(self):
        """An answer after which the runtime closes its connection says
        so, as the family's server does: libevhtp (Triton) answers
        HTTP/1.0 in HTTP/1.0 and a 1.1 request that asked to close with
        Connection: close, h11 (KServe, MLServer) says it to both.  Said
        nothing, a keepalive pool in front keeps the connection and its
        next request meets the close (a sequence lost to it in CI)."""
        for family in FAMILIES:
            for version, ask in (("1.0", ""), ("1.1", "Connection: close"),
                                 ("1.1", "")):
                with self.subTest(family=family, version=version, ask=ask):
                    s = socket.create_connection(
                        ("127.0.0.1", self.ports[family]), timeout=10)
                    s.sendall(("GET /v2/health/ready HTTP/%s\r\nHost: x"
                               "\r\n%s\r\n" % (version, ask + "\r\n"
                                                  if ask else "")).encode())
                    data = b""
                    while b"\r\n\r\n" not in data:
                        piece = s.recv(65536)
                        self.assertTrue(piece, data)
                        data += piece
                    head = data.split(b"\r\n\r\n")[0].decode().lower()
                    lines = head.split("\r\n")
                    said = [h for h in lines[1:]
                            if h.startswith("connection:")]
                    closes = version == "1.0" or ask
                    if family == "triton" and version == "1.0":
                        self.assertTrue(lines[0].startswith("http/1.0 "),
                                        head)
                        self.assertEqual(said, [], head)
                    else:
                        self.assertTrue(lines[0].startswith("http/1.1 "),
                                        head)
                        self.assertEqual(said, ["connection: close"]
                                         if closes else [], head)
                    # and it closes when it said so, only then
                    s.settimeout(0.3 if not closes else 10)
                    try:
                        while s.recv(65536):
                            pass
                        gone = True
                    except socket.timeout:
                        gone = False
                    s.close()
                    self.assertEqual(gone, bool(closes), head)

    # 1 ---------------------------------------------------------------

    def test_1_kserve_json_answers(self):
        """KServe writes "parameters": null on each output of a JSON
        answer (and model_version, parameters null at the top): with the
        README's configuration the client got a 502."""
        doc, out = self.outputs(self.infer("readme", "simple",
                                           {"inputs": SIMPLE_IN}))
        self.assertEqual(out, {"OUTPUT0": SIMPLE_SUM,
                               "OUTPUT1": SIMPLE_DIFF})
        # null means absent: the client gets no null
        self.assertNotIn(None, [doc.get(k) for k in doc])
        self.assertNotIn("parameters", doc["outputs"][0])

        # oip on alone, for a gzip body: the answer is read all the same
        body = gzip.compress(dumps({"inputs": SIMPLE_IN,
                                    "outputs": [{"name": "OUTPUT0"}]}))
        st, h, raw = self.ngx.post("/kserve-keep/v2/models/simple/infer",
                                   body, {"Content-Encoding": "gzip"})
        doc, out = self.outputs((st, h, raw))
        self.assertEqual(out, {"OUTPUT0": SIMPLE_SUM})
        self.assertNotIn(b"null", raw)

        # and for a raw client: KServe answers JSON, the client binary
        st, h, raw = self.ngx.post("/kserve-raw/v2/models/identity/infer",
                                   pack("FP32", [1.5, -2.0]), {IHCL: "0"})
        self.assertEqual(st, 200, raw)
        doc, rest = split_binary(h, raw)
        self.assertEqual(rest, pack("FP32", [1.5, -2.0]))
        self.assertNotIn(None, [doc.get(k) for k in doc])

    # 2 ---------------------------------------------------------------

    def test_2_kserve_client_nulls(self):
        """KServe's InferenceRequest model, dumped: null for id,
        parameters, outputs and each input's parameters.  Accepted, and
        dropped from what goes upstream, under keep too: Triton itself
        refuses such a request."""
        inputs = [dict(i, parameters=None) for i in SIMPLE_IN]
        doc = {"id": None, "parameters": None, "inputs": inputs,
               "outputs": None}
        for family in FAMILIES:
            for prefix in (family, family + "-keep"):
                with self.subTest(location=prefix):
                    _, out = self.outputs(self.infer(prefix, "simple", doc))
                    self.assertEqual(out["OUTPUT0"], SIMPLE_SUM)

        # what goes upstream holds no null, and only that changed
        self.rec.clear()
        body = dumps({"id": None, "inputs": [SIMPLE_IN[0]],
                      "outputs": [{"name": "o", "parameters": None}]})
        self.ngx.post("/small/v2/models/m/infer", body)
        sent = self.rec.last()["body"]
        self.assertNotIn(b"null", sent)
        self.assertIn(b'"outputs":[{"name":"o"}]', sent)

    # 3 ---------------------------------------------------------------

    def test_3_nonfinite_to_a_json_only_runtime(self):
        """MLServer reads JSON with orjson, which has no NaN and no
        Infinity: under oip_upstream_nonfinite refuse the edge says so;
        with pass, MLServer's own 422 comes back readable."""
        nan_json = {"inputs": [{"name": "INPUT0", "shape": [3],
                                "datatype": "FP32",
                                "data": [1.0, float("nan"), 2.0]}]}
        resp = self.infer("mlserver", "identity", nan_json)
        self.assertJSONError(resp, 400, "input 'INPUT0': element 1 is NaN; "
                             "the upstream reads JSON without NaN or "
                             "Infinity (oip_upstream_nonfinite refuse)")

        # a binary client's infinity would be written as JSON
        inf_bin = {"inputs": [{"name": "INPUT0", "shape": [2],
                               "datatype": "FP64", "parameters":
                               {"binary_data_size": 16}}]}
        resp = self.infer("mlserver", "identity", inf_bin,
                          [pack("FP64", [0.5, float("-inf")])])
        self.assertJSONError(resp, 400, "element 1 is -Infinity")

        # pass: the runtime refuses, in words a client can read
        resp = self.infer("mlserver-pass", "identity", nan_json)
        msg = self.assertJSONError(resp, 422, "unexpected character")
        self.assertIn("(at body.", msg)

    # 4 ---------------------------------------------------------------

    def test_4_error_answers_in_the_protocols_shape(self):
        """tritonclient reads only {"error": string}."""
        # MLServer: FastAPI's 422 for a binary body (here valid UTF-8, so
        # orjson stops after the document; bytes that are not, before)
        body, n = binary_body({"inputs": [{"name": "INPUT0", "shape": [2],
                                           "datatype": "INT8", "parameters":
                                           {"binary_data_size": 2}}]},
                              [b"12"])
        resp = self.ngx.post("/mlserver-keep/v2/models/identity/infer",
                             body, {IHCL: str(n)})
        self.assertJSONError(resp, 422, "unexpected content after document")
        body2, n2 = binary_body({"inputs": [{"name": "INPUT0", "shape": [1],
                                             "datatype": "FP32", "parameters":
                                             {"binary_data_size": 4}}]},
                                [pack("FP32", [1.5])])
        resp = self.ngx.post("/mlserver-keep/v2/models/identity/infer",
                             body2, {IHCL: str(n2)})
        self.assertJSONError(resp, 422, "str is not valid UTF-8")

        # MLServer: a model that fails, Starlette's text/plain 500
        resp = self.infer("mlserver", "fail", {"inputs": SIMPLE_IN})
        self.assertEqual(self.assertJSONError(resp, 500),
                         "Internal Server Error")

        # KServe: FastAPI's 422 for a binary body sent as JSON, via keep
        resp = self.ngx.post("/kserve-keep/v2/models/identity/infer",
                             body, {IHCL: str(n)})
        self.assertJSONError(resp, 422, "JSON decode error (at body.")

        # {"error": ...} already: untouched, status and all
        resp = self.ngx.post("/kserve/v2/models/simple/versions/1/infer",
                             dumps({"inputs": SIMPLE_IN}))
        self.assertEqual(self.assertJSONError(resp, 501),
                         "Model versioning not supported yet.")
        resp = self.infer("triton", "fail", {"inputs": SIMPLE_IN})
        self.assertEqual(self.assertJSONError(resp, 500), "the model failed")

    # 5 ---------------------------------------------------------------

    def test_5_unlisted_outputs_dropped(self):
        """MLServer ignores the outputs list; the client listed OUTPUT1,
        binary, and gets that alone."""
        for family in FAMILIES:
            with self.subTest(family=family):
                resp = self.infer(family, "simple", {
                    "inputs": SIMPLE_IN, "outputs": [
                        {"name": "OUTPUT1",
                         "parameters": {"binary_data": True}}]})
                doc, out = self.outputs(resp)
                self.assertEqual(out, {"OUTPUT1": SIMPLE_DIFF})
                self.assertEqual(resp[1]["content-type"],
                                 "application/octet-stream")

    # 8 ---------------------------------------------------------------

    def test_8_json_limit_bounds_what_comes(self):
        """oip_max_json_size 1k; requests of 1,023 and 1,024 bytes are
        within it: made binary, their header grows, and they pass."""
        for size in (1023, 1024):
            with self.subTest(size=size):
                doc = {"id": "", "inputs": [{"name": "x", "shape": [3],
                                             "datatype": "INT8",
                                             "data": [1, 2, 3]}]}
                pad = size - len(dumps(doc))
                doc["id"] = "p" * pad
                body = dumps(doc)
                self.assertEqual(len(body), size)
                self.rec.clear()
                st, _, out = self.ngx.post("/small/v2/models/m/infer", body)
                self.assertEqual(st, 200, out)
                sent = self.rec.last()
                self.assertGreater(int(sent["headers"][IHCL.lower()]), 1024)
                self.assertTrue(sent["body"].endswith(b"\x01\x02\x03"))

        # one byte more is the client's: 413
        doc["id"] += "p"
        resp = self.ngx.post("/small/v2/models/m/infer", dumps(doc))
        self.assertJSONError(resp, 413, "the JSON of 1025 bytes exceeds "
                             "oip_max_json_size (1024)")

    # the matrix --------------------------------------------------------

    def test_matrix_with_an_unlisted_output(self):
        """Every datatype x JSON or binary in x JSON or binary out, the
        client listing OUTPUT0 of two: it gets OUTPUT0 alone, in its
        form, in front of every family."""
        n = 0
        for family in FAMILIES:
            for dt, values in CASES:
                if family == "mlserver":
                    if dt == "BF16":
                        continue        # MLServer has none (500)
                    values = [v for v in values if not (
                        isinstance(v, float) and not math.isfinite(v))]
                for client in ("json", "binary"):
                    for want_binary in (False, True):
                        what = "%s %s %s in, %s out" % (
                            family, dt, client,
                            "binary" if want_binary else "JSON")
                        inp = {"name": "INPUT0", "shape": [len(values)],
                               "datatype": dt}
                        chunks = []
                        if client == "json":
                            inp["data"] = values
                        else:
                            chunks.append(pack(dt, values))
                            inp["parameters"] = {
                                "binary_data_size": len(chunks[0])}
                        other = {"name": "INPUT1", "shape": [2],
                                 "datatype": "INT32", "data": [7, 8]}
                        resp = self.infer(family, "identity", {
                            "inputs": [inp, other],
                            "outputs": [{"name": "OUTPUT0", "parameters":
                                         {"binary_data": want_binary}}]},
                            chunks)
                        st, h, body = resp
                        self.assertEqual(st, 200, "%s: %s" % (what,
                                                              body[:200]))
                        doc, rest = split_binary(h, body)
                        self.assertEqual([o["name"] for o in doc["outputs"]],
                                         ["OUTPUT0"], what)
                        o = doc["outputs"][0]
                        if want_binary:
                            self.assertEqual(rest, pack(dt, values), what)
                        else:
                            self.assertEqual(rest, b"", what)
                            self.assertEqual(pack(dt, o["data"]),
                                             pack(dt, values), what)
                        n += 1
        self.assertEqual(n, 4 * 2 * 2 * len(CASES) - 2 * 2)


if __name__ == "__main__":
    run_tests()
