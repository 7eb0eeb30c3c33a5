#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""Prometheus metrics through real nginx with two workers: counted
exactly after concurrent requests of known outcomes, parsed by the
Prometheus client's own parser (Debian's python3-prometheus-client), and
model labels bounded whatever names clients send."""

import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import (PASS, QUICK, SINGLE, SLOW, GatewayTestCase, run_tests,
                     wait_for)
from prometheus_client.parser import text_string_to_metric_families

GOOD = {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 16],
                    "data": list(range(16))},
                   {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16],
                    "data": [1] * 16}]}
SHORT = {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [2],
                     "data": [1]}]}
BROKEN = '{"inputs": ['


class Metrics(GatewayTestCase):

    @classmethod
    def setUpGateway(cls):
        cls.rt = cls.start_runtime("triton")
        http = """
    oip_metrics_zone zone=metrics:1m models=3;
    limit_req_zone $oip_model zone=per_model:1m rate=1r/m;
    limit_req_status 429;
    oip_signature_zone zone=models:1m;
    proxy_cache_path {dir}/cache keys_zone=infer:1m;
    map $oip_digest $oip_nocache {{ "" 1; default 0; }}
"""
        server = """
        location /binary/ {{
            oip on;
            oip_upstream_inputs binary;
            proxy_pass http://127.0.0.1:{rt}/;
        }}
        location /keep/ {{
            oip on;
            proxy_pass http://127.0.0.1:{rt}/;
        }}
        location /limited/ {{
            oip on;
            limit_req zone=per_model;
            proxy_pass http://127.0.0.1:{rt}/;
        }}
        location /outbin/ {{
            oip on;
            oip_upstream_outputs binary;
            proxy_pass http://127.0.0.1:{rt}/;
        }}
        location /sig/ {{
            oip on;
            oip_signatures /_meta zone=models;
            proxy_pass http://127.0.0.1:{rt}/;
        }}
        location /_meta/ {{
            internal;
            proxy_pass http://127.0.0.1:{rt}/;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
        }}
        location /cached/ {{
            oip on;
            proxy_cache infer;
            proxy_cache_methods POST;
            proxy_cache_key "$proxy_host$oip_digest";
            proxy_cache_valid 200 10m;
            # as docs/operations.md has it; and the next request, on the
            # other worker, may look before the first has stored its
            # answer: it waits for it instead of missing too
            proxy_cache_lock on;
            proxy_no_cache $oip_nocache;
            proxy_cache_bypass $oip_nocache;
            proxy_pass http://127.0.0.1:{rt}/;
        }}
        location /off/ {{
            proxy_pass http://127.0.0.1:{rt}/;
        }}
        location /slow/ {{
            oip on;
            client_body_timeout 1s;
            proxy_pass http://127.0.0.1:{rt}/;
        }}
        location /limits/ {{
            oip on;
            oip_max_json_size 1k;
            oip_max_tensor_size 64;
            oip_max_depth 8;
            proxy_pass http://127.0.0.1:{rt}/;
        }}
        location = /metrics {{
            oip_metrics;
        }}
"""
        cls.ngx = cls.start_nginx(server, http=http, workers=2,
                                  rt=cls.rt.port)

    def scrape_text(self):
        return self.ngx.request("GET", "/metrics")[2]

    def scrape(self):
        st, h, body = self.ngx.request("GET", "/metrics")
        self.assertEqual(st, 200)
        self.assertEqual(h["content-type"], "text/plain; version=0.0.4")
        # Prometheus's own linter (Debian's prometheus package)
        lint = subprocess.run(["promtool", "check", "metrics"], input=body,
                              capture_output=True)
        self.assertEqual(lint.returncode, 0, lint.stdout + lint.stderr)
        samples = {}
        families = {}
        for fam in text_string_to_metric_families(body.decode()):
            families[fam.name] = fam.type
            for s in fam.samples:
                key = (s.name,) + tuple(sorted(s.labels.items()))
                samples[key] = s.value
        return families, samples

    def value(self, samples, name, **labels):
        return samples.get((name,) + tuple(sorted(labels.items())), 0)

    @staticmethod
    def total(samples, name="oip_requests_total"):
        return sum(v for k, v in samples.items() if k[0] == name)

    def setUp(self):
        # what the class's earlier tests counted (each waited for its own)
        self.base = self.total(self.scrape()[1])

    def scrape_counted(self, n):
        """The scrape once the test's n infer requests are counted.  A
        request is counted in its log phase, after its answer is sent: the
        client may scrape, through the other worker, before that."""
        n += self.base
        fams, m = wait_for(self.scrape, lambda fm: self.total(fm[1]) >= n)
        self.assertEqual(self.total(m), n, m)
        return fams, m

    def parallel(self, n, fn):
        threads = [threading.Thread(target=fn) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def test_counted_exactly(self):
        post = self.ngx.post
        self.parallel(20, lambda: post("/binary/v2/models/simple/infer",
                                       json.dumps(GOOD)))
        self.parallel(7, lambda: post("/keep/v2/models/simple/infer",
                                      json.dumps(GOOD)))
        self.parallel(5, lambda: post("/binary/v2/models/simple/infer",
                                      json.dumps(SHORT)))
        self.parallel(3, lambda: post("/binary/v2/models/simple/infer",
                                      BROKEN))
        for _ in range(4):
            post("/off/v2/models/simple/infer", json.dumps(GOOD))
        # 20 + 7 + 5 + 3: /off/ has no oip, it is not counted
        fams, m = self.scrape_counted(35)

        self.assertEqual(fams["oip_requests"], "counter")
        self.assertEqual(fams["oip_conversion_seconds"], "histogram")
        req = "oip_requests_total"
        self.assertEqual(self.value(m, req, model="simple",
                                    outcome="converted", code="200"), 20)
        self.assertEqual(self.value(m, req, model="simple",
                                    outcome="passed", code="200"), 7)
        self.assertEqual(self.value(m, req, model="simple",
                                    outcome="rejected", code="400"), 8)
        rej = "oip_rejections_total"
        self.assertEqual(self.value(m, rej, model="simple", reason="shape"),
                         5)
        self.assertEqual(self.value(m, rej, model="simple", reason="syntax"),
                         3)
        # 20 JSON requests of 2 x 16 INT32: 128 tensor bytes each, 7 more
        self.assertEqual(self.value(m, "oip_tensor_bytes_total",
                                    model="simple", direction="request",
                                    form="json"), 27 * 128)
        self.assertEqual(self.value(m, "oip_conversion_seconds_count",
                                    model="simple", direction="request"), 27)
        self.assertEqual(self.value(m, "oip_conversion_seconds_bucket",
                                    model="simple", direction="request",
                                    le="+Inf"), 27)
        self.assertEqual(self.value(m, "oip_upstream_answers_total",
                                    model="simple", outcome="passed"), 27)

    def test_limited(self):
        doc = json.dumps(GOOD)
        self.ngx.post("/limited/v2/models/simple/infer", doc)
        self.ngx.post("/limited/v2/models/simple/infer", doc)
        _, m = self.scrape_counted(2)
        self.assertGreaterEqual(self.value(m, "oip_rejections_total",
                                           model="simple",
                                           reason="limited"), 1)
        self.assertGreaterEqual(self.value(m, "oip_requests_total",
                                           model="simple",
                                           outcome="rejected", code="429"),
                                1)


    def test_refused_by_nginx_and_lookalikes(self):
        """A body that stops arriving is closed on without an answer, and
        counted as a 408 refused for no limit; a look-alike of an infer
        path is the model's 404."""
        s = socket.create_connection(("127.0.0.1", self.ngx.port))
        s.settimeout(30 * SLOW)
        s.sendall(b"POST /slow/v2/models/simple/infer HTTP/1.1\r\n"
                  b"Host: x\r\nContent-Length: 100\r\n\r\n{\"inputs\"")
        self.assertEqual(s.recv(1000), b"")     # closed, nothing said
        s.close()
        st, _, body = self.ngx.post("/keep/v2/models/simple/infer/",
                                    json.dumps(GOOD))
        self.assertEqual(st, 404, body)
        _, m = self.scrape_counted(2)
        for code in ("408", "404"):
            self.assertEqual(self.value(m, "oip_requests_total",
                                        model="simple", outcome="rejected",
                                        code=code), 1, code)
        self.assertEqual(self.value(m, "oip_rejections_total",
                                    model="simple", reason="other"), 2)


def tensor(**kw):
    t = {"name": "INPUT0", "datatype": "INT32", "shape": [2],
         "data": [1, 2]}
    t.update(kw)
    return json.dumps({"inputs": [{k: v for k, v in t.items()
                                   if v is not None}]})


GZIP_JUNK = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03garbage"

# (location, body, headers, the reason label): one refusal of each family
# of message, labelled as today (issue 26 makes the labels codes; they
# must not move)
REASONS = [
    ("keep", BROKEN, {}, "syntax"),
    ("keep", '{"inputs": [], "inputs": []}', {}, "syntax"),
    ("keep", "[1, 2]", {}, "syntax"),
    ("keep", tensor(data=[1]), {}, "shape"),
    ("keep", tensor(shape="2"), {}, "shape"),
    ("keep", tensor(shape=[-2]), {}, "shape"),
    ("keep", tensor(data=None, parameters={"binary_data_size": -1}), {},
     "shape"),
    ("keep", tensor(data=None, parameters={"binary_data_size": 8}),
     {"Inference-Header-Content-Length": "500"}, "shape"),
    ("keep", tensor(datatype="FP8"), {}, "datatype"),
    ("keep", tensor(datatype="INT8", data=[1, 300]), {}, "datatype"),
    ("keep", tensor(data=[1, 1.5]), {}, "datatype"),
    ("keep", tensor(data=[1, "a"]), {}, "datatype"),
    ("limits", json.dumps({"inputs": [], "pad": "x" * 2000}), {}, "limit"),
    ("limits", tensor(shape=[100], data=list(range(100))), {}, "limit"),
    ("limits", '{"inputs": [[[[[[[[[[1]]]]]]]]]]}', {}, "other"),
    ("keep", '{"inputs": []}', {}, "other"),
    ("keep", '{"inputs": {}}', {}, "other"),
    ("keep", '{"inputs": [{"name": "INPUT0", "datatype": "INT32", '
     '"shape": [1], "data": [1]}, {"name": "INPUT0", "datatype": "INT32", '
     '"shape": [1], "data": [1]}]}', {}, "other"),
    ("keep", tensor(name=""), {}, "other"),
    ("keep", json.dumps({"inputs": [{"name": "INPUT0", "datatype": "INT32",
                                     "shape": [2], "data": [1, 2]}],
                         "parameters": []}), {}, "other"),
    ("keep", GZIP_JUNK, {"Content-Encoding": "gzip"}, "encoding"),
    ("keep", tensor(), {"Content-Encoding": "br"}, "encoding"),
    ("keep/v2/models/simple/infer/", tensor(), {}, "other"),
    ("sig", tensor(datatype="FP32", data=[1.0, 2.0]), {}, "signature"),
    ("sig/v2/models/nosuch/infer", tensor(), {}, "signature"),
]


class Reasons(Metrics):
    """Its own nginx: each refusal's reason label, one at a time."""

    test_counted_exactly = None
    test_limited = None
    test_refused_by_nginx_and_lookalikes = None

    def rejections(self):
        _, m = self.scrape()
        out = {}
        for k, v in m.items():
            if k[0] == "oip_rejections_total" and v:
                reason = dict(k[1:])["reason"]
                out[reason] = out.get(reason, 0) + v
        return out

    def test_reasons(self):
        for where, body, headers, reason in REASONS:
            path = "/%s" % where if "/v2/" in where else \
                "/%s/v2/models/simple/infer" % where
            with self.subTest(path=path, body=body[:60], reason=reason):
                before = self.rejections()
                st, _, out = self.ngx.post(path, body, headers)
                self.assertGreaterEqual(st, 400, out)
                after = wait_for(self.rejections, lambda r: sum(
                    r.values()) > sum(before.values()))
                moved = {k: after[k] - before.get(k, 0) for k in after
                         if after[k] != before.get(k, 0)}
                self.assertEqual(moved, {reason: 1}, out)


class Answers(Metrics):
    """Its own nginx: answers, the cache, signature lookups."""

    test_counted_exactly = None
    test_limited = None
    test_refused_by_nginx_and_lookalikes = None

    def test_answers_cache_lookups(self):
        doc = json.dumps(GOOD)
        for _ in range(3):
            st, _, out = self.ngx.post("/outbin/v2/models/identity/infer",
                                       doc)
            self.assertEqual(st, 200, out)
        for _ in range(4):
            self.ngx.post("/sig/v2/models/simple/infer", doc)
        self.ngx.post("/sig/v2/models/nosuch/infer", doc)
        for _ in range(3):
            self.ngx.post("/cached/v2/models/simple/infer", doc)
        _, m = self.scrape_counted(3 + 5 + 3)
        # identity echoes 2 x 16 INT32, read as binary, given as JSON
        self.assertEqual(self.value(m, "oip_tensor_bytes_total",
                                    model="identity", direction="response",
                                    form="json"), 3 * 128)
        self.assertEqual(self.value(m, "oip_upstream_answers_total",
                                    model="identity", outcome="converted"),
                         3)
        self.assertEqual(self.value(m, "oip_cache_total", model="simple",
                                    status="MISS"), 1)
        self.assertEqual(self.value(m, "oip_cache_total", model="simple",
                                    status="HIT"), 2)
        # simple: once fetched (a miss), then found; nosuch: a miss
        look = "oip_signature_lookups_total"
        self.assertEqual(self.value(m, look, result="miss"), 2)
        self.assertEqual(self.value(m, look, result="hit"), 3)
        self.assertEqual(self.value(m, look, result="failed"), 0)


class Cardinality(Metrics):
    """Its own nginx: the labels it hands out are the test's."""

    test_counted_exactly = None
    test_limited = None
    test_refused_by_nginx_and_lookalikes = None

    def test_cardinality_bounded(self):
        """Random names never get labels: only models an upstream
        answered (not with a 404), at most models=3 of them."""
        rnd = random.Random(7)
        # 10,000 names (1,000 in ./build.sh check, and under valgrind,
        # where they took 18 s), on one keepalive connection
        count = 1000 if QUICK or PASS == "valgrind" else 10000
        names = ["m%08x" % rnd.getrandbits(32) for _ in range(count)]
        conn = http.client.HTTPConnection("127.0.0.1", self.ngx.port,
                                          timeout=30 * SLOW)
        body = json.dumps(GOOD)
        for n in names:
            conn.request("POST", "/keep/v2/models/%s/infer" % n, body)
            conn.getresponse().read()
        conn.close()
        for n in ("identity", "identity_fp32", "identity_bytes", "fail"):
            self.ngx.post("/keep/v2/models/%s/infer" % n, json.dumps({
                "inputs": [{"name": "INPUT0", "datatype": "BYTES",
                            "shape": [1], "data": ["x"]}]}))
        _, m = self.scrape_counted(count + 4)
        models = {dict(k[1:]).get("model") for k in m
                  if k[0] == "oip_requests_total"}
        self.assertNotIn(names[0], models)
        self.assertIn("_other", models)
        self.assertLessEqual(len(models - {"_other"}), 3, models)
        self.assertEqual(self.value(m, "oip_requests_total",
                                    model="_other", outcome="passed",
                                    code="404"), count)
        # the zone's size is what models=3 made it: the exposition too
        self.assertLess(len(self.scrape_text()), 16384)


class Reload(Metrics):
    """Its own nginx: it is reloaded."""

    test_counted_exactly = None
    test_limited = None
    test_refused_by_nginx_and_lookalikes = None

    @unittest.skipIf(SINGLE, "nginx reloads in master mode only")
    def test_reload(self):
        """A reload keeps the counters; one that changes models= alone
        is refused, and the old configuration counts on."""
        refusal = "models= changed from 3 to 4"
        # the [emerg] is the point: the class's log check is for the rest
        self.addCleanup(self.forget_log_lines, refusal)
        key = ("oip_requests_total", ("code", "200"), ("model", "simple"),
               ("outcome", "passed"))
        doc = json.dumps(GOOD)
        self.ngx.post("/keep/v2/models/simple/infer", doc)
        _, before = self.scrape_counted(1)
        with open(self.ngx.conf) as f:
            conf = f.read()
        started = "start worker process"
        for models, refused in (("3", False), ("4", True)):
            with open(self.ngx.conf, "w") as f:
                f.write(conf.replace("models=3", "models=" + models))
            workers = self.ngx.log().count(started)
            self.ngx.proc.send_signal(signal.SIGHUP)
            # the master's verdict, once it has read the file: new workers
            # or the refusal (the file is not written again before)
            log = wait_for(self.ngx.log, lambda t: refusal in t
                           or t.count(started) >= workers + 2)
            self.assertEqual(refusal in log, refused)
        with open(self.ngx.conf, "w") as f:
            f.write(conf)
        self.ngx.post("/keep/v2/models/simple/infer", doc)
        _, after = self.scrape_counted(2)
        self.assertEqual(after[key], before[key] + 1)

    def forget_log_lines(self, text):
        path = os.path.join(self.ngx.dir, "error.log")
        with open(path) as f:
            lines = [l for l in f if text not in l]
        with open(path, "w") as f:
            f.writelines(lines)


if __name__ == "__main__":
    run_tests()
