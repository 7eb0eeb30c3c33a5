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
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import SINGLE, SLOW, GatewayTestCase, run_tests
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
        fams, m = self.scrape()

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
        _, m = self.scrape()
        self.assertGreaterEqual(self.value(m, "oip_rejections_total",
                                           model="simple",
                                           reason="limited"), 1)
        self.assertGreaterEqual(self.value(m, "oip_requests_total",
                                           model="simple",
                                           outcome="rejected", code="429"),
                                1)


class Answers(Metrics):
    """Its own nginx: answers, the cache, signature lookups."""

    test_counted_exactly = None
    test_limited = None

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
        _, m = self.scrape()
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

    def test_cardinality_bounded(self):
        """Random names never get labels: only models an upstream
        answered (not with a 404), at most models=3 of them."""
        rnd = random.Random(7)
        # 10,000 names, on one keepalive connection
        count = 10000
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
        _, m = self.scrape()
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

    @unittest.skipIf(SINGLE, "nginx reloads in master mode only")
    def test_reload(self):
        """A reload keeps the counters; one that changes models= alone
        is refused, and the old configuration counts on."""
        doc = json.dumps(GOOD)
        self.ngx.post("/keep/v2/models/simple/infer", doc)
        _, before = self.scrape()
        conf = open(self.ngx.conf).read()
        for models, refused in (("3", False), ("4", True)):
            with open(self.ngx.conf, "w") as f:
                f.write(conf.replace("models=3", "models=" + models))
            self.ngx.proc.send_signal(signal.SIGHUP)
            time.sleep(1.5)
            self.assertEqual("models= changed from 3 to 4" in self.ngx.log(),
                             refused)
        with open(self.ngx.conf, "w") as f:
            f.write(conf)
        self.ngx.post("/keep/v2/models/simple/infer", doc)
        _, after = self.scrape()
        key = ("oip_requests_total", ("code", "200"), ("model", "simple"),
               ("outcome", "passed"))
        self.assertEqual(after[key], before[key] + 1)

        # the [emerg] was the point: the class's log check is for the rest
        open(os.path.join(self.ngx.dir, "error.log"), "w").close()


if __name__ == "__main__":
    run_tests()
