#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""The module's variables in nginx's own engines, two workers: every
variable in an access log for JSON, binary, mixed, raw, gzip and refused
requests, and limit_req keyed by $oip_model limiting one model and not
another."""

import gzip
import json
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import GatewayTestCase, IHCL, binary_body, run_tests, wait_for

VARS = ["oip_model", "oip_model_version", "oip_request_id", "oip_inputs",
        "oip_elements", "oip_tensor_bytes", "oip_in_form",
        "oip_upstream_form", "oip_error", "oip_reason", "oip_convert_time",
        "oip_digest", "oip_priority", "oip_timeout", "oip_sequence_id",
        "oip_sequence_start", "oip_sequence_end", "seq_key", "request_id",
        "status", "request_uri"]


class Variables(GatewayTestCase):

    @classmethod
    def setUpGateway(cls):
        cls.rt = cls.start_runtime("triton")
        fmt = "\\t".join("$" + v for v in VARS)
        http = """
    log_format oip escape=json '%s';
    limit_req_zone $oip_model zone=per_model:1m rate=1r/m;
    limit_req_status 429;
    # docs/directives.md: a request without a sequence is its own key
    map $oip_sequence_id $seq_key {{
        ""      $request_id;
        default $oip_sequence_id;
    }}
""" % fmt
        server = """
        access_log {dir}/oip.log oip;

        location /binary/ {{
            oip on;
            oip_upstream_inputs binary;
            proxy_pass http://127.0.0.1:{rt}/;
        }}
        location /keep/ {{
            oip on;
            proxy_pass http://127.0.0.1:{rt}/;
        }}
        location /raw/ {{
            oip on;
            oip_raw_input INPUT0 FP32 -1;
            proxy_pass http://127.0.0.1:{rt}/;
        }}
        location /limited/ {{
            oip on;
            limit_req zone=per_model;
            proxy_pass http://127.0.0.1:{rt}/;
        }}
        location / {{
            proxy_pass http://127.0.0.1:{rt}/;
        }}
"""
        cls.ngx = cls.start_nginx(server, http=http, workers=2,
                                  rt=cls.rt.port)
        cls.log = os.path.join(cls.ngx.dir, "oip.log")

    sent = {}

    def post(self, uri, body, headers=None):
        self.sent[uri] = self.sent.get(uri, 0) + 1
        return self.ngx.post(uri, body, headers)

    def get(self, uri):
        self.sent[uri] = self.sent.get(uri, 0) + 1
        return self.ngx.request("GET", uri)

    def logged(self, uri):
        """The access log's fields for the last request to uri, once every
        request sent to it is logged: a request is logged after its answer
        is sent, by whichever worker had it."""
        def lines():
            if not os.path.exists(self.log):
                return []
            with open(self.log) as f:
                return [fields for fields in (
                    dict(zip(VARS, line.split("\t")))
                    for line in f.read().splitlines())
                    if fields.get("request_uri") == uri]
        got = wait_for(lines, lambda ls: len(ls) >= self.sent.get(uri, 0)
                       and ls)
        if not got:
            self.fail("no log line for %s" % uri)
        return got[-1]

    def check(self, fields, **want):
        for k, v in want.items():
            self.assertEqual(fields["oip_" + k], v, (k, fields))

    def test_priority_and_timeout(self):
        """The request-level priority and timeout, in every form: JSON,
        binary (in its JSON header), as the client sent them where no
        oip_priority or levels apply."""
        def doc(params):
            return {"inputs": [{"name": "INPUT0", "datatype": "FP32",
                                "shape": [1], "data": [1]}],
                    "parameters": params}
        for n, (params, prio, tmo) in enumerate([
                ({"priority": 1, "timeout": 60000000}, "1", "60000000"),
                ({"priority": 0, "timeout": 0}, "0", ""),
                ({}, "", "")]):
            uri = "/keep/v2/models/identity/infer?n=%d" % n
            self.assertEqual(self.post(uri, json.dumps(doc(params)))[0], 200)
            self.check(self.logged(uri), priority=prio, timeout=tmo)
        header = {"inputs": [{"name": "INPUT0", "datatype": "FP32",
                              "shape": [1], "parameters":
                              {"binary_data_size": 4}}],
                  "parameters": {"priority": 2, "timeout": 30000000}}
        body, ihcl = binary_body(header, [struct.pack("<f", 1)])
        uri = "/keep/v2/models/identity/infer?n=binary"
        st, _, out = self.post(uri, body, {IHCL: str(ihcl)})
        self.assertEqual(st, 200, out)
        self.check(self.logged(uri), priority="2", timeout="30000000")
        for key in ("priority", "timeout"):
            for bad in (-1, 1.5, "1", True, 2 ** 63):
                uri = "/keep/v2/models/identity/infer?bad=%s%s" % (key, bad)
                st, _, out = self.post(uri, json.dumps(doc({key: bad})))
                self.assertEqual(st, 400, out)
                self.assertIn('parameter "%s" must be an integer from 0 '
                              'to 9223372036854775807' % key,
                              json.loads(out)["error"])
                self.check(self.logged(uri), priority="", reason="datatype")

    def test_sequence(self):
        """Triton's sequence batcher's parameters, in JSON and in a binary
        request's header; none, 0 and "" are empty; the map of
        docs/directives.md gives a request without one its own key."""
        def doc(params):
            return {"inputs": [{"name": "INPUT0", "datatype": "FP32",
                                "shape": [1], "data": [1]}],
                    "parameters": params}
        for n, (params, sid, start, end) in enumerate([
                ({"sequence_id": 42, "sequence_start": True}, "42", "1", ""),
                ({"sequence_id": 18446744073709551615,
                  "sequence_end": True}, "18446744073709551615", "", "1"),
                ({"sequence_id": "s-\u00e9", "sequence_start": False},
                 "s-\u00e9", "", ""),
                ({"sequence_id": 0, "sequence_start": True}, "", "1", ""),
                ({"sequence_id": ""}, "", "", ""),
                ({}, "", "", "")]):
            with self.subTest(params=params):
                uri = "/keep/v2/models/identity/infer?seq=%d" % n
                st, _, out = self.post(uri, json.dumps(doc(params)))
                self.assertEqual(st, 200, out)
                f = self.logged(uri)
                self.check(f, sequence_id=sid, sequence_start=start,
                           sequence_end=end)
                self.assertEqual(f["seq_key"], sid or f["request_id"])
                self.assertRegex(f["request_id"], "^[0-9a-f]{32}$")
        header = {"inputs": [{"name": "INPUT0", "datatype": "FP32",
                              "shape": [1], "parameters":
                              {"binary_data_size": 4}}],
                  "parameters": {"sequence_id": "abc", "sequence_end": True}}
        body, ihcl = binary_body(header, [struct.pack("<f", 1)])
        uri = "/binary/v2/models/identity/infer?seq=binary"
        st, _, out = self.post(uri, body, {IHCL: str(ihcl)})
        self.assertEqual(st, 200, out)
        self.check(self.logged(uri), sequence_id="abc", sequence_start="",
                   sequence_end="1")
        for key, bad, words in [
                ("sequence_id", -1, "an integer from 0 to "
                 "18446744073709551615 or a string"),
                ("sequence_id", 1.5, "or a string"),
                ("sequence_id", True, "or a string"),
                ("sequence_start", 1, "must be a boolean"),
                ("sequence_end", "true", "must be a boolean")]:
            with self.subTest(key=key, bad=bad):
                uri = "/keep/v2/models/identity/infer?bad=%s%s" % (key, bad)
                st, _, out = self.post(uri, json.dumps(doc({key: bad})))
                self.assertEqual(st, 400, out)
                msg = json.loads(out)["error"]
                self.assertIn('parameter "%s" must' % key, msg)
                self.assertIn(words, msg)
                self.check(self.logged(uri), sequence_id="",
                           reason="datatype")

    def test_json_converted(self):
        uri = "/binary/v2/models/identity/infer"
        doc = {"id": "req-\u00e9\"7", "inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [2],
             "data": [1.5, 2]},
            {"name": "INPUT1", "datatype": "INT8", "shape": [1, 3],
             "data": [[1, 2, 3]]}]}
        st, _, body = self.post(uri, json.dumps(doc))
        self.assertEqual(st, 200, body)
        f = self.logged(uri)
        self.check(f, model="identity", model_version="",
                   request_id='req-\\u00e9\\"7'.replace("\\u00e9", "é"),
                   inputs="2", elements="5", tensor_bytes="11",
                   in_form="json", upstream_form="binary", error="",
                   reason="")
        self.assertRegex(f["oip_convert_time"], r"^\d+\.\d{3}$")
        self.assertRegex(f["oip_digest"], r"^[0-9a-f]{64}$")

    def test_binary_and_mixed(self):
        uri = "/keep/v2/models/identity/versions/1/infer"
        body, n = binary_body({"inputs": [
            {"name": "INPUT0", "datatype": "INT16", "shape": [2],
             "parameters": {"binary_data_size": 4}},
            {"name": "INPUT1", "datatype": "BOOL", "shape": [1],
             "data": [True]}]}, [struct.pack("<2h", 1, -1)])
        st, _, out = self.post(uri, body, {IHCL: str(n)})
        self.assertEqual(st, 200, out)
        self.check(self.logged(uri), model="identity", model_version="1",
                   request_id="", inputs="2", elements="3",
                   tensor_bytes="5", in_form="mixed", upstream_form="mixed")

        uri = "/binary/v2/models/identity/infer?b"
        body, n = binary_body({"inputs": [
            {"name": "INPUT0", "datatype": "UINT8", "shape": [4],
             "parameters": {"binary_data_size": 4}}]}, [b"\1\2\3\4"])
        self.post(uri, body, {IHCL: str(n)})
        self.check(self.logged(uri), inputs="1", tensor_bytes="4",
                   in_form="binary", upstream_form="binary")

    def test_raw(self):
        uri = "/raw/v2/models/identity/infer"
        st, _, out = self.post(uri, struct.pack("<3f", 1, 2, 3),
                                   {IHCL: "0"})
        self.assertEqual(st, 200, out)
        f = self.logged(uri)
        self.check(f, inputs="1", elements="3",
                   tensor_bytes="12", in_form="raw", upstream_form="binary")
        self.assertRegex(f["oip_digest"], r"^[0-9a-f]{64}$")
        uri = "/keep/v2/models/identity_fp32/infer"
        self.post(uri, struct.pack("<2f", 1, 2), {IHCL: "0"})
        self.check(self.logged(uri), inputs="1", elements="0",
                   tensor_bytes="8", in_form="raw", upstream_form="raw")

    def test_gzip(self):
        uri = "/keep/v2/models/identity/infer?gz"
        doc = {"inputs": [{"name": "INPUT0", "datatype": "INT32",
                           "shape": [3], "data": [1, 2, 3]}]}
        st, _, out = self.post(uri, gzip.compress(json.dumps(doc)
                                                      .encode()),
                                   {"Content-Encoding": "gzip"})
        self.assertEqual(st, 200, out)
        self.check(self.logged(uri), inputs="1", elements="3",
                   tensor_bytes="12", in_form="json", upstream_form="json")

    def test_refused(self):
        uri = "/binary/v2/models/simple/infer"
        doc = {"id": "x", "inputs": [{"name": "INPUT0", "datatype": "INT32",
                                      "shape": [2], "data": [1]}]}
        self.assertJSONError(self.post(uri, json.dumps(doc)), 400)
        f = self.logged(uri)
        self.check(f, model="simple", request_id="", inputs="",
                   in_form="", convert_time="", digest="",
                   error="input 'INPUT0': data has 1 elements, shape [2] "
                         "needs 2", reason="shape")
        self.assertEqual(f["status"], "400")

    def test_not_infer(self):
        self.get("/v2/models/simple")
        f = self.logged("/v2/models/simple")
        self.check(f, model="", model_version="", inputs="", error="",
                   digest="")

    def test_limit_req_per_model(self):
        """limit_req_zone $oip_model: the model is known from the first
        phase, oip on or not."""
        doc = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "INT8",
                                      "shape": [1], "data": [1]}]})
        first = self.post("/limited/v2/models/identity/infer", doc)[0]
        again = self.post("/limited/v2/models/identity/infer", doc)
        # refused before the body, in the protocol's shape all the same
        self.assertJSONError(again, 429, "too many requests")
        again = again[0]
        other = self.post("/limited/v2/models/identity_fp32/infer",
                              json.dumps({"inputs": [
                                  {"name": "INPUT0", "datatype": "FP32",
                                   "shape": [1], "data": [1]}]}))[0]
        self.assertEqual((first, again, other), (200, 429, 200))
        self.assertEqual(self.logged("/limited/v2/models/identity/infer")
                         ["oip_model"], "identity")


if __name__ == "__main__":
    run_tests()
