#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""The model-aware edge through real nginx: each request checked against
its model's signature, fetched from the example runtime's metadata by a
subrequest and kept in a zone all workers share.

Every refusal is checked not to reach the runtime (its infer counter),
every fetch is counted by the runtime (its metadata counter).
"""

import json
import os
import re
import signal
import socket
import struct
import sys
import threading
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import (GatewayTestCase, IHCL, SINGLE, SLOW, binary_body,
                     free_port, run_tests, split_binary, unhurried,
                     wait_for)

SIMPLE_IN = [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32",
     "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32",
     "data": [1] * 16}]

META = """
        location /_oip_meta{name}/ {{
            internal;
            proxy_pass http://127.0.0.1:{port}/;
            proxy_pass_request_body off;
            proxy_pass_request_headers off;
            proxy_set_header Content-Length "";
            proxy_read_timeout {timeout};
            subrequest_output_buffer_size 64k;
        }}
"""


def location(name, port, directives, meta_port=None, timeout="2s"):
    """/NAME/ proxied to port, signatures from /_oip_metaNAME/ (braces
    doubled: Nginx formats the server block)."""
    text = ("""
        location /{name}/ {{
            oip on;
            oip_signatures /_oip_meta{name} zone={zone};
            {directives}
            proxy_pass http://127.0.0.1:{port}/;
        }}
    """.format(name=name, port=port, directives=directives,
               zone="short" if name.startswith("short") else "models")
            + META.format(name=name, port=meta_port or port,
                          timeout=timeout))
    return text.replace("{", "{{").replace("}", "}}")


class Hooks:
    """The example runtime's /_test/ hooks."""

    def __init__(self, port, host="127.0.0.1"):
        self.base = "http://%s:%d/_test/" % (host, port)

    def call(self, method, path, doc=None):
        data = json.dumps(doc).encode() if doc is not None else None
        req = urllib.request.Request(self.base + path, data=data,
                                     method=method)
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read() or b"{}")

    def counts(self):
        return self.call("GET", "counts")

    def meta(self, key):
        return self.counts()["meta"].get(key, 0)

    def infer(self, model):
        return self.counts()["infer"].get(model, 0)

    def model(self, name, inputs, outputs=()):
        def t(spec):
            return [{"name": n, "datatype": d, "shape": s}
                    for n, d, s in spec]
        self.call("PUT", "models/" + name,
                  {"inputs": t(inputs), "outputs": t(outputs)})

    def fault(self, name, mode, seconds=0):
        self.call("PUT", "meta_fault/" + name,
                  {"mode": mode, "seconds": seconds})


class Signatures(GatewayTestCase):

    @classmethod
    def setUpGateway(cls):
        cls.rt = cls.start_runtime("triton")
        cls.kserve = cls.start_runtime("kserve")
        cls.t241 = cls.start_runtime("triton", ["--triton-version",
                                                "2.41.0"])
        cls.ml = cls.start_runtime("mlserver")
        cls.ov = cls.start_runtime("openvino")
        cls.hooks = Hooks(cls.rt.port)
        cls.khooks = Hooks(cls.kserve.port)
        cls.family_hooks = {"triton": cls.hooks, "kserve": cls.khooks,
                            "mlserver": Hooks(cls.ml.port),
                            "openvino": Hooks(cls.ov.port)}
        dead = free_port()
        p = cls.rt.port
        conf = (location("t", p, "")
                + location("closed", p, "oip_signature_fail closed;")
                + location("opt", p, "oip_signature_optional INPUT1 "
                           "other:INPUT0;")
                + location("optm", p, "oip_signature_optional "
                           "simple:INPUT1;")
                + location("coerce", p, "oip_signature_coerce on; "
                           "oip_upstream_outputs binary;")
                + location("coerceb", p, "oip_signature_coerce on; "
                           "oip_upstream_inputs binary;")
                # its requests' log lines: a request is logged once its
                # background refresh is done
                + location("short", p, "access_log @LOG@;").replace(
                    "@LOG@", "{dir}/short.log")
                + location("down", p, "", meta_port=dead)
                + location("downc", p, "oip_signature_fail closed;",
                           meta_port=dead)
                + location("slow", p, "", timeout="1s")
                + location("slowc", p, "oip_signature_fail closed;",
                           timeout="1s")
                + location("k", cls.kserve.port,
                           "oip_signature_fail closed;")
                + location("cap", p, "oip_signature_fail closed;",
                           timeout="20s")
                + location("ml", cls.ml.port, "oip_signature_fail closed; "
                           "oip_upstream_inputs json; "
                           "oip_upstream_outputs json;")
                + location("ov", cls.ov.port, "oip_signature_fail closed; "
                           "oip_upstream_inputs binary;")
                + location("old", cls.t241.port,
                           "oip_signature_fail closed;")
                + """
        location /off/ {{
            oip on;
            oip_signatures off;
            proxy_pass http://127.0.0.1:%d/;
        }}
        """ % p)
        cls.ngx = cls.start_nginx(
            conf, http="oip_signature_zone zone=models:1m valid=60s "
                       "invalid=1s;\n"
                       "    oip_signature_zone zone=short:64k valid=1s "
                       "invalid=1s;")

    def setUp(self):
        for h in self.family_hooks.values():
            h.call("POST", "reset")

    def infer(self, loc, model, doc, chunks=(), headers=None, version=None):
        body, n = binary_body(doc, chunks)
        h = dict(headers or {})
        if chunks:
            h[IHCL] = str(n)
        path = "/%s/v2/models/%s%s/infer" % (
            loc, model, "/versions/%s" % version if version else "")
        return self.ngx.post(path, body, h)

    def refused(self, loc, model, doc, status, contains, chunks=()):
        before = self.hooks.infer(model)
        self.assertJSONError(self.infer(loc, model, doc, chunks), status,
                             contains)
        self.assertEqual(self.hooks.infer(model), before,
                         "the refused request reached the runtime")

    # the rules, each broken once ----------------------------------------

    def test_fits(self):
        self.hooks.model("fits", [("INPUT0", "INT32", [1, 16]),
                                  ("INPUT1", "INT32", [1, 16])])
        for _ in range(3):
            st, _, body = self.infer("t", "fits", {"inputs": SIMPLE_IN})
            self.assertEqual(st, 200, body)
        self.assertEqual(self.hooks.meta("fits"), 1, "fetched once")
        self.assertEqual(self.hooks.infer("fits"), 3)

    def test_undeclared_input(self):
        doc = {"inputs": SIMPLE_IN + [{"name": "INPUT2", "shape": [1],
                                       "datatype": "INT32", "data": [1]}]}
        self.refused("t", "simple", doc, 400,
                     "model 'simple' has no input 'INPUT2'; its inputs: "
                     "'INPUT0', 'INPUT1'")

    def test_missing_input(self):
        self.refused("t", "simple", {"inputs": SIMPLE_IN[:1]}, 400,
                     "model 'simple' needs input 'INPUT1', missing")

    def test_optional_input(self):
        st, _, body = self.infer("opt", "simple", {"inputs": SIMPLE_IN[:1]})
        # the runtime itself insists on both: its own 400, not the gateway's
        self.assertEqual(st, 400, body)
        self.assertIn(b"expected 2 inputs", body)
        self.refused("opt", "simple", {"inputs": SIMPLE_IN[1:]}, 400,
                     "needs input 'INPUT0'")          # other:INPUT0 only
        st, _, body = self.infer("optm", "simple", {"inputs": SIMPLE_IN[:1]})
        self.assertIn(b"expected 2 inputs", body)

    def test_datatype(self):
        doc = {"inputs": [dict(SIMPLE_IN[0], datatype="FP32"), SIMPLE_IN[1]]}
        self.refused("t", "simple", doc, 400,
                     "input 'INPUT0' is FP32, model 'simple' expects INT32")

    def test_rank_and_dimension(self):
        doc = {"inputs": [dict(SIMPLE_IN[0], shape=[16]), SIMPLE_IN[1]]}
        self.refused("t", "simple", doc, 400,
                     "input 'INPUT0': shape [16] does not fit [1,16]")
        doc = {"inputs": [dict(SIMPLE_IN[0], shape=[1, 15],
                               data=list(range(15))), SIMPLE_IN[1]]}
        self.refused("t", "simple", doc, 400,
                     "shape [1,15] does not fit [1,16] of model 'simple'")

    def test_variable_dimension(self):
        self.hooks.model("vd", [("x", "FP32", [-1, 2])],
                         [("y", "FP32", [-1, 2])])
        for n in (1, 3):
            st, _, body = self.infer("t", "vd", {"inputs": [
                {"name": "x", "datatype": "FP32", "shape": [n, 2],
                 "data": [1.5] * (2 * n)}]})
            self.assertEqual(st, 200, body)

    def test_binary_input_checked(self):
        doc = {"inputs": [SIMPLE_IN[0], {
            "name": "INPUT1", "shape": [1, 16], "datatype": "INT16",
            "parameters": {"binary_data_size": 32}}]}
        self.refused("t", "simple", doc, 400, "input 'INPUT1' is INT16",
                     chunks=[b"\0" * 32])

    def test_undeclared_output(self):
        self.refused("t", "simple", {"inputs": SIMPLE_IN, "outputs": [
            {"name": "OUTPUT0"}, {"name": "OUTPUT7"}]}, 400,
            "model 'simple' has no output 'OUTPUT7'; its outputs: "
            "'OUTPUT0', 'OUTPUT1'")

    def test_no_inputs_declared(self):
        """identity publishes "inputs": []: served unchecked."""
        st, _, body = self.infer("closed", "identity", {"inputs": [
            {"name": "anything", "datatype": "BOOL", "shape": [1],
             "data": [True]}]})
        self.assertEqual(st, 200, body)

    def test_off(self):
        st, _, body = self.infer("off", "simple", {"inputs": SIMPLE_IN[:1]})
        self.assertIn(b"expected 2 inputs", body)
        self.assertEqual(self.hooks.meta("simple"), 0)

    # versions, unknown models, negative caching ------------------------

    def test_versions(self):
        st, _, body = self.infer("t", "simple", {"inputs": SIMPLE_IN},
                                 version="1")
        self.assertEqual(st, 200, body)
        self.assertEqual(self.hooks.meta("simple/1"), 1)
        st, _, body = self.infer("t", "simple", {"inputs": SIMPLE_IN},
                                 version="3")
        self.assertJSONError((st, {"content-type": "application/json"},
                              body), 404, "model 'simple' version '3' not "
                             "found")

    def test_unknown_model_cached(self):
        for _ in range(3):
            self.assertJSONError(self.infer("short", "nosuch", {
                "inputs": SIMPLE_IN}), 404, "model 'nosuch' not found")
        self.assertEqual(self.hooks.meta("nosuch"), 1, "kept for invalid=")
        self.assertEqual(self.hooks.infer("nosuch"), 0)
        time.sleep(1.2)
        self.assertJSONError(self.infer("short", "nosuch", {
            "inputs": SIMPLE_IN}), 404)
        self.assertEqual(self.hooks.meta("nosuch"), 2, "asked again after")

    def test_unknown_model_triton_before_2_42(self):
        """Triton said "unknown model" with a 400 before 2.42."""
        self.assertJSONError(self.infer("old", "nosuch", {
            "inputs": SIMPLE_IN}), 404, "model 'nosuch' not found")
        self.assertJSONError(self.infer("old", "simple", {
            "inputs": SIMPLE_IN}, version="7"), 404,
            "model 'simple' version '7' not found")
        st, _, body = self.infer("old", "simple", {"inputs": SIMPLE_IN})
        self.assertEqual(st, 200, body)

    @unhurried
    def test_fetches_capped(self):
        """64 fetches in flight at most in a worker: random model names
        and a slow metadata endpoint cannot park requests without end."""
        n = 72
        for i in range(n):
            self.hooks.fault("cap%d" % i, "slow", 2)
        out = [None] * n

        def run(i):
            out[i] = self.infer("cap", "cap%d" % i, {"inputs": SIMPLE_IN})

        threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        capped = [o for o in out if o[0] == 503]
        self.assertEqual(len(capped), n - 64, [o[0] for o in out])
        self.assertIn(b"64 signatures are being fetched already",
                      capped[0][2])
        self.assertEqual(sorted(set(o[0] for o in out)), [404, 503])

    def test_unknown_model_before_the_body(self):
        """An unknown model costs no body read: refused as the headers
        come, the body never sent."""
        s = socket.create_connection(("127.0.0.1", self.ngx.port), 10 * SLOW)
        s.sendall(b"POST /t/v2/models/nobody/infer HTTP/1.1\r\n"
                  b"Host: x\r\nContent-Length: 900000\r\n\r\n")
        s.settimeout(10 * SLOW)
        head = s.recv(4096)
        s.close()
        self.assertTrue(head.startswith(b"HTTP/1.1 404"), head[:200])

    def test_unknown_model_keepalive(self):
        """Refused before its body was read, the body sent all the same
        is discarded: the connection's next request is answered as
        itself, not as a 400 for the body's bytes."""
        body = json.dumps({"inputs": SIMPLE_IN}).encode()
        s = socket.create_connection(("127.0.0.1", self.ngx.port), 10 * SLOW)
        s.settimeout(10 * SLOW)
        s.sendall(b"POST /t/v2/models/nobody/infer HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                  + b"GET /t/v2/health/ready HTTP/1.1\r\nHost: x\r\n"
                  b"Connection: close\r\n\r\n")
        got = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        s.close()
        statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", got)
        self.assertEqual(statuses, [b"404", b"200"], got[:600])

    # raw binary from the signature --------------------------------------

    def test_raw_from_signature(self):
        data = struct.pack("<4f", 1.5, -2, 0, 8)
        st, headers, body = self.ngx.post(
            "/t/v2/models/identity_fp32/infer", data, {IHCL: "0"})
        self.assertEqual(st, 200, body)
        doc, rest = split_binary(headers, body)
        self.assertEqual(doc["outputs"][0]["shape"], [4])
        self.assertEqual(rest, data)

    def test_raw_several_inputs(self):
        before = self.hooks.infer("simple")
        self.assertJSONError(self.ngx.post("/t/v2/models/simple/infer",
                                           b"\0" * 128, {IHCL: "0"}), 400,
                             "the data of one input, and model 'simple' "
                             "has 2")
        self.assertEqual(self.hooks.infer("simple"), before)

    # coercion ----------------------------------------------------------

    def test_coerce(self):
        self.hooks.model("i32", [("x", "INT32", [2])], [("y", "INT32", [2])])
        doc = {"inputs": [{"name": "x", "datatype": "INT64", "shape": [2],
                           "data": [7, -2147483648]}]}
        self.refused("t", "i32", doc, 400, "input 'x' is INT64, model "
                     "'i32' expects INT32")
        st, _, body = self.infer("coerce", "i32", doc)
        self.assertEqual(st, 200, body)
        out = json.loads(body)["outputs"][0]
        self.assertEqual((out["datatype"], out["data"]),
                         ("INT32", [7, -2147483648]))
        doc["inputs"][0]["data"] = [7, 2147483648]
        self.refused("coerce", "i32", doc, 400,
                     "element 1: 2147483648 is out of range for INT32")

        self.hooks.model("f32", [("x", "FP32", [2])], [("y", "FP32", [2])])
        doc = {"inputs": [{"name": "x", "datatype": "INT64", "shape": [2],
                           "data": [16777216, 3]}]}
        for loc in ("coerce", "coerceb"):
            st, _, body = self.infer(loc, "f32", doc)
            self.assertEqual(st, 200, body)
        doc["inputs"][0]["data"] = [16777217, 3]
        self.refused("coerce", "f32", doc, 400,
                     "16777217 has no exact FP32 value")

        self.hooks.model("f16", [("x", "FP16", [3])], [("y", "FP16", [3])])
        doc = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [3],
                           "data": [1.0, 0.1, 65504]}]}
        st, _, body = self.infer("coerce", "f16", doc)
        self.assertEqual(st, 200, body)
        # FP16 bits, printed shortest: the runtime got 0x3c00 0x2e66 0x7bff
        self.assertEqual(struct.pack("<3e", *json.loads(body)["outputs"][0]
                                     ["data"]),
                         struct.pack("<3e", 1.0, 0.1, 65504))
        doc["inputs"][0]["data"] = [1.0, 0.1, 70000]
        self.refused("coerce", "f16", doc, 400,
                     "70000 is out of range for FP16")

    # the zone: validity, refresh, misfit refetch ------------------------

    def test_refresh_after_valid(self):
        """valid=1s: the old signature serves while one background
        subrequest refreshes it; then the new one is used."""
        self.hooks.model("chg", [("x", "FP32", [2])], [("y", "FP32", [2])])
        two = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2],
                           "data": [1, 2]}]}
        three = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [3],
                             "data": [1, 2, 3]}]}
        self.assertEqual(self.infer("short", "chg", two)[0], 200)
        self.hooks.model("chg", [("x", "FP32", [3])], [("y", "FP32", [3])])
        time.sleep(1.2)
        # stale: still the old signature, and a refresh starts in the
        # background; the request is logged once the refresh is kept
        log = os.path.join(self.ngx.dir, "short.log")

        def logged():
            with open(log) as f:
                return f.read().count("/short/v2/models/chg/infer")
        before = logged()
        st, _, body = self.infer("short", "chg", two)
        self.assertIn(st, (200, 400), body)   # the runtime's own verdict
        self.assertEqual(wait_for(logged, lambda n: n > before), before + 1)
        self.assertEqual(self.hooks.meta("chg"), 2, "one refresh")
        before = self.hooks.meta("chg")
        st, _, body = self.infer("short", "chg", three)
        self.assertEqual(st, 200, body)
        self.assertEqual(self.hooks.meta("chg"), before, "no refetch")
        self.refused("short", "chg", two, 400,
                     "shape [2] does not fit [3]")

    def test_misfit_refetches_once(self):
        """valid=60s: a model updated under the gateway is found out by
        the first request that does not fit the old signature."""
        self.hooks.model("upd", [("x", "FP32", [2])], [("y", "FP32", [2])])
        two = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2],
                           "data": [1, 2]}]}
        three = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [3],
                             "data": [1, 2, 3]}]}
        self.assertEqual(self.infer("t", "upd", two)[0], 200)
        self.hooks.model("upd", [("x", "FP32", [3])], [("y", "FP32", [3])])
        time.sleep(1.1)       # one refetch a second for a key
        st, _, body = self.infer("t", "upd", three)
        self.assertEqual(st, 200, body)
        self.assertEqual(self.hooks.meta("upd"), 2)
        # a client that keeps sending misfits does not hammer the runtime
        for _ in range(5):
            self.refused("t", "upd", two, 400, "does not fit [3]")
        self.assertLessEqual(self.hooks.meta("upd"), 3)

    # failures: open and closed ------------------------------------------

    def test_metadata_down(self):
        st, _, body = self.infer("down", "simple", {"inputs": SIMPLE_IN})
        self.assertEqual(st, 200, body)
        self.assertIn("forwarded unchecked", self.ngx.log())
        self.assertJSONError(self.infer("downc", "simple", {
            "inputs": SIMPLE_IN}), 503, "the signature of model 'simple' "
            "is not available")

    @unhurried
    def test_metadata_slow(self):
        self.hooks.fault("simple", "slow", 2)
        st, _, body = self.infer("slow", "simple", {"inputs": SIMPLE_IN})
        self.assertEqual(st, 200, body)
        self.assertJSONError(self.infer("slowc", "simple", {
            "inputs": SIMPLE_IN}), 503, "answered 504")

    def test_metadata_broken(self):
        for mode, contains in (("garbage", "the model's metadata"),
                               ("html500", "answered 500"),
                               ("huge", "could not be read"),
                               ("wrong", "the model's metadata")):
            self.hooks.fault("simple", mode)
            self.assertJSONError(self.infer("closed", "simple", {
                "inputs": SIMPLE_IN}), 502, contains)
            st, _, body = self.infer("t", "simple", {"inputs": SIMPLE_IN})
            self.assertEqual(st, 200, (mode, body))

    def test_http2(self):
        """HTTP/2 streams wait and are woken as HTTP/1.1 requests."""
        self.hooks.model("h2", [("x", "INT8", [2])], [("y", "INT8", [2])])
        self.hooks.fault("h2", "slow", 0.3)
        doc = {"inputs": [{"name": "x", "datatype": "INT8", "shape": [2],
                           "data": [1, 2]}]}
        out = []
        threads = [threading.Thread(target=lambda: out.append(self.ngx.curl(
            "-X", "POST", "--data-binary", "@-",
            "{base}/t/v2/models/h2/infer", h2=True,
            data=json.dumps(doc).encode()))) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual([o[0] for o in out], [200] * 4, out)
        self.assertEqual(self.hooks.meta("h2"), 1)
        doc["inputs"][0]["shape"] = [1, 2]
        st, body = self.ngx.curl("-X", "POST", "--data-binary", "@-",
                                 "{base}/t/v2/models/h2/infer", h2=True,
                                 data=json.dumps(doc).encode())
        self.assertEqual(st, 400, body)
        self.assertIn(b"shape [1,2] does not fit [2]", body)

    def test_every_family(self):
        """The same checks in front of each family's metadata."""
        for family, loc in (("triton", "closed"), ("kserve", "k"),
                            ("mlserver", "ml"), ("openvino", "ov")):
            with self.subTest(family=family):
                hooks = self.family_hooks[family]
                hooks.model("fam", [("x", "INT8", [-1])],
                            [("y", "INT8", [-1])])
                doc = {"inputs": [{"name": "x", "datatype": "INT8",
                                   "shape": [2], "data": [1, 2]}]}
                st, _, body = self.infer(loc, "fam", doc)
                self.assertEqual(st, 200, body)
                doc["inputs"][0]["datatype"] = "INT16"
                self.assertJSONError(self.infer(loc, "fam", doc), 400,
                                     "model 'fam' expects INT8")
                self.assertJSONError(self.infer(loc, "nofam", doc), 404,
                                     "model 'nofam' not found")
                self.assertEqual(hooks.infer("fam"), 1)
                self.assertEqual(hooks.meta("fam"), 1)

    # KServe's metadata --------------------------------------------------

    def test_kserve(self):
        self.khooks.model("km", [("x", "INT8", [-1])], [])
        st, _, body = self.infer("k", "km", {"inputs": [
            {"name": "x", "datatype": "INT8", "shape": [2], "data": [1, 2]}]})
        self.assertEqual(st, 200, body)
        self.assertEqual(self.khooks.meta("km"), 1)
        self.assertJSONError(self.infer("k", "km", {"inputs": [
            {"name": "x", "datatype": "INT16", "shape": [2],
             "data": [1, 2]}]}), 400, "expects INT8")
        self.assertJSONError(self.infer("k", "gone", {"inputs": [
            {"name": "x", "datatype": "INT16", "shape": [2],
             "data": [1, 2]}]}), 404, "model 'gone' not found")


class SharedZone(GatewayTestCase):
    """Two workers, one zone: concurrent first requests, a full zone, a
    reload under traffic."""

    @classmethod
    def setUpGateway(cls):
        cls.rt = cls.start_runtime("triton")
        cls.hooks = Hooks(cls.rt.port)
        p = cls.rt.port
        conf = (location("t", p, "")
                + location("tiny", p, "").replace("zone=models",
                                                  "zone=tiny"))
        cls.ngx = cls.start_nginx(
            conf, workers=2,
            http="oip_signature_zone zone=models:1m valid=60s;\n"
                 "    oip_signature_zone zone=tiny:32k valid=60s "
                 "invalid=60s;")

    def setUp(self):
        self.hooks.call("POST", "reset")

    def infer(self, loc, model, doc=None):
        return self.ngx.post("/%s/v2/models/%s/infer" % (loc, model),
                             json.dumps(doc or {"inputs": SIMPLE_IN}))

    def parallel(self, n, fn):
        out = [None] * n

        def run(i):
            out[i] = fn(i)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return out

    @unhurried
    def test_concurrent_first_requests(self):
        """One fetch per worker and key: the others wait for it."""
        self.hooks.model("conc", [("INPUT0", "INT32", [1, 16]),
                                  ("INPUT1", "INT32", [1, 16])])
        self.hooks.fault("conc", "slow", 0.5)
        out = self.parallel(24, lambda i: self.infer("t", "conc"))
        self.assertEqual([o[0] for o in out], [200] * 24,
                         [o[2][:100] for o in out if o[0] != 200])
        self.assertIn(self.hooks.meta("conc"), (1, 2),
                      "at most one fetch per worker")
        self.assertEqual(self.hooks.infer("conc"), 24)

    def test_concurrent_unknown_model(self):
        self.hooks.fault("ghost", "slow", 0.3)
        out = self.parallel(12, lambda i: self.infer("t", "ghost"))
        self.assertEqual([o[0] for o in out], [404] * 12)
        self.assertIn(self.hooks.meta("ghost"), (1, 2))

    def test_zone_full(self):
        """32k holds a few dozen entries: the oldest are given up, nothing
        fails, and a given-up model is fetched again."""
        for i in range(400):
            st, _, body = self.infer("tiny", "gone%d" % i)
            self.assertEqual(st, 404, body)
        self.assertEqual(self.hooks.meta("gone0"), 1)
        st, _, body = self.infer("tiny", "gone0")
        self.assertEqual(st, 404, body)
        self.assertEqual(self.hooks.meta("gone0"), 2, "evicted, fetched again")
        st, _, body = self.infer("tiny", "gone399")
        self.assertEqual(self.hooks.meta("gone399"), 1, "the newest stays")
        self.assertNotIn("no memory", self.ngx.log())

    @unittest.skipIf(SINGLE, "nginx reloads in master mode only: as one "
                     "process (valgrind's runs) it answers 500s and mixes "
                     "its log into sockets with plain proxy_pass too")
    @unhurried
    def test_reload_under_traffic(self):
        self.hooks.model("rl", [("INPUT0", "INT32", [1, 16]),
                                ("INPUT1", "INT32", [1, 16])])
        self.assertEqual(self.infer("t", "rl")[0], 200)
        stop = threading.Event()
        seen = []

        def traffic():
            while not stop.is_set():
                seen.append(self.infer("t", "rl")[0])

        threads = [threading.Thread(target=traffic) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.3)
        self.ngx.proc.send_signal(signal.SIGHUP)
        time.sleep(1.0 * SLOW)
        stop.set()
        for t in threads:
            t.join()
        self.assertTrue(seen and set(seen) == {200}, set(seen))
        self.assertEqual(self.hooks.meta("rl"), 1,
                         "the zone survives the reload")
        self.assertIn("reconfiguring", self.ngx.log())


@unhurried
class Abandoned(GatewayTestCase):
    """The request that owns a fetch goes away: those waiting for it are
    woken, and one of them fetches."""

    @classmethod
    def setUpGateway(cls):
        cls.rt = cls.start_runtime("triton")
        cls.hooks = Hooks(cls.rt.port)
        cls.ngx = cls.start_nginx(
            location("t", cls.rt.port, "", timeout="10s"),
            http="oip_signature_zone zone=models:1m;")

    def test_owner_goes_away(self):
        self.hooks.model("ab", [("INPUT0", "INT32", [1, 16]),
                                ("INPUT1", "INT32", [1, 16])])
        self.hooks.fault("ab", "slow", 1.0)
        body = json.dumps({"inputs": SIMPLE_IN}).encode()
        owner = socket.create_connection(("127.0.0.1", self.ngx.port))
        owner.sendall(b"POST /t/v2/models/ab/infer HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(body) + body)
        time.sleep(0.2)
        result = []
        waiter = threading.Thread(target=lambda: result.append(
            self.ngx.post("/t/v2/models/ab/infer", body)))
        waiter.start()
        time.sleep(0.2)
        owner.close()
        waiter.join()
        self.assertEqual(result[0][0], 200, result[0][2])
        self.assertIn(self.hooks.meta("ab"), (1, 2))


if __name__ == "__main__":
    run_tests()
