#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""Debug logging: with `error_log ... debug`, the module says what it
decided for each request, as nginx's own filters do, so that an operator
can tell why a request was converted, refused or left alone: what was
detected (the model, the framing, how the body was read), what was
converted and into what, which headers changed, and how the answer was
treated."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import SLOW, GatewayTestCase, IHCL, binary_body, run_tests
from tensors import pack

SIMPLE = {"inputs": [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32",
     "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32",
     "data": [1] * 16}]}


class DebugLog(GatewayTestCase):

    @classmethod
    def setUpGateway(cls):
        cls.rt = cls.start_runtime("triton")
        cls.ngx = cls.start_nginx("""
            client_max_body_size 1m;

            location / {{
                oip on;
                oip_upstream_inputs binary;
                oip_upstream_outputs binary;
                proxy_pass http://127.0.0.1:{rt};
            }}
            location /keep/ {{
                oip on;
                proxy_pass http://127.0.0.1:{rt}/;
            }}
        """, rt=cls.rt.port, log_level="debug")

    def logged(self, fn, *expected):
        """Runs fn(); returns its result once every expected piece of
        text is in the lines the log gained (within a few seconds)."""
        path = os.path.join(self.ngx.dir, "error.log")
        start = os.path.getsize(path)
        result = fn()
        deadline = time.time() + 5 * SLOW
        while True:
            with open(path, errors="replace") as f:
                f.seek(start)
                text = "\n".join(l for l in f.read().splitlines()
                                 if "oip: " in l)
            missing = [e for e in expected if e not in text]
            if not missing or time.time() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(missing, [], "the debug log says:\n" + text)
        return result, text

    def test_converted(self):
        (st, headers, body), text = self.logged(
            lambda: self.ngx.post("/v2/models/simple/infer",
                                  json.dumps(SIMPLE)),
            'oip: infer request for model "simple", reading its body',
            "oip: IHCL -1, encoding 0",
            "oip: body ",
            "oip: request valid: rewritten:1 raw:0 decompressed:0 "
            "binary:1",
            "oip: request headers changed: 0x7, Content-Type "
            "application/octet-stream",
            "oip: answer 200 held",
            "oip: answer of ",
            "oip: answer reshaped: binary:0")
        self.assertEqual(st, 200, body)
        self.assertEqual(json.loads(body)["outputs"][0]["data"],
                         list(range(1, 17)))

    def test_kept(self):
        header = {"inputs": [
            {"name": "INPUT0", "shape": [2], "datatype": "FP32",
             "parameters": {"binary_data_size": 8}}],
            "parameters": {"binary_data_output": True}}
        body, n = binary_body(header, [pack("FP32", [1.5, -2.0])])
        (st, headers, _), text = self.logged(
            lambda: self.ngx.post("/keep/v2/models/identity/infer", body,
                                  {IHCL: str(n)}),
            "oip: IHCL %d, encoding 0" % n,
            "oip: request valid: rewritten:0",
            "oip: request headers changed: 0x0, Content-Type as sent")
        self.assertEqual(st, 200)
        # kept and not managed: the answer is not held
        self.assertNotIn("oip: answer held", text)

    def test_refused(self):
        bad = dict(SIMPLE, inputs=[dict(SIMPLE["inputs"][0], data=[1, 2])])
        (resp, text) = self.logged(
            lambda: self.ngx.post("/v2/models/simple/infer",
                                  json.dumps(bad)),
            "oip: request refused with 400")
        self.assertJSONError(resp, 400, "data has 2 elements")

    def test_not_infer(self):
        (st, _, _), text = self.logged(
            lambda: self.ngx.request("GET", "/v2/models/simple"),
            "oip: not an infer request, passed on")
        self.assertEqual(st, 200)

    def test_nginx_error_page(self):
        (resp, text) = self.logged(
            lambda: self.ngx.post("/v2/models/simple/infer",
                                  b" " * (2 * 1024 * 1024)),
            "oip: nginx's error page 413 given as JSON")
        self.assertJSONError(resp, 413, "client_max_body_size")


if __name__ == "__main__":
    run_tests()
