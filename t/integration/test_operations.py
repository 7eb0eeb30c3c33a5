#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""docs/operations.md's gateway, run: docs/examples/operations.conf in
front of the example runtime, its JSON access log, its cache and its
metrics; the alert rules (docs/examples/oip-alerts.yml) and the Grafana
dashboard (docs/examples/oip-dashboard.json) valid PromQL by promtool,
and every metric they query one the module writes."""

import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import ROOT, SLOW, GatewayTestCase, run_tests, wait_for
from prometheus_client.parser import text_string_to_metric_families
from test_examples import runnable
from test_signatures import Hooks

EXAMPLES = os.path.join(ROOT, "docs", "examples")
RULES = os.path.join(EXAMPLES, "oip-alerts.yml")
DASHBOARD = os.path.join(EXAMPLES, "oip-dashboard.json")

# every family the module writes (docs/directives.md, "Metrics")
FAMILIES = {"oip_requests_total", "oip_rejections_total",
            "oip_tensor_bytes_total", "oip_conversion_seconds",
            "oip_upstream_answers_total", "oip_cache_total",
            "oip_signature_lookups_total", "oip_admission_total",
            "oip_queue_seconds", "oip_inflight_requests",
            "oip_inflight_bytes", "oip_queue_requests", "oip_sequences_total",
            "oip_sequences_active", "oip_time_to_first_event_seconds",
            "oip_stream_events_total"}
HISTOGRAMS = {"oip_conversion_seconds", "oip_queue_seconds",
              "oip_time_to_first_event_seconds"}


def simple(a, datatype="INT32", shape=(1, 16)):
    return json.dumps({"inputs": [
        {"name": "INPUT0", "datatype": datatype, "shape": list(shape),
         "data": [a] * 16},
        {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16],
         "data": [1] * 16}]})


def metric_names(text):
    """The oip_ metric names a PromQL text uses."""
    return set(re.findall(r"\b(oip_[a-z_]+)\b", text))


def rule_exprs():
    """The expr of each rule in the rules file: one line, or a block."""
    exprs, block = [], None
    with open(RULES) as f:
        lines = f.read().splitlines(True)
    for line in lines:
        if block is not None:
            if line.strip() and len(line) - len(line.lstrip()) > indent:
                block.append(line.strip())
                continue
            exprs.append(" ".join(block))
            block = None
        m = re.match(r"^(\s*)expr:\s*(.*)$", line.rstrip())
        if m and m.group(2) == "|":
            block, indent = [], len(m.group(1))
        elif m:
            exprs.append(m.group(2))
    if block:
        exprs.append(" ".join(block))
    return exprs


def dashboard_exprs():
    with open(DASHBOARD) as f:
        doc = json.load(f)
    return [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]


class Operations(GatewayTestCase):

    @classmethod
    def setUpGateway(cls):
        cls.rt = cls.start_runtime("triton")
        cls.grpc = cls.start_grpc_runtime(["--decoupled", "identity:3:0"])
        with open(os.path.join(EXAMPLES, "operations.conf")) as f:
            text = f.read()
        cls.ngx = cls.start_nginx("", conf=runnable(text, cls.rt.port,
                                                    cls.grpc.port))
        # traffic of every kind the dashboard and the alerts show
        post = cls.ngx.post
        for _ in range(2):                     # a miss, then a hit
            post("/v2/models/simple/infer", simple(5))
        post("/v2/models/simple/infer", simple(6, shape=(2,)))
        post("/v2/models/simple/infer", simple(7, datatype="FP32"))
        post("/v2/models/nosuch/infer", simple(1))
        post("/v2/models/simple/infer", "{")
        # a stateful model's sequence, begun and ended
        Hooks(cls.rt.port).call("PUT", "models/chat_sequence", {
            "inputs": [{"name": "INPUT0", "datatype": "FP32",
                        "shape": [-1]}],
            "outputs": [{"name": "INPUT0", "datatype": "FP32",
                         "shape": [-1]}]})
        for k in range(2):
            post("/v2/models/chat_sequence/infer", json.dumps(
                {"inputs": [{"name": "INPUT0", "datatype": "FP32",
                             "shape": [1], "data": [1]}],
                 "parameters": {"sequence_id": 5, "sequence_start": k == 0,
                                "sequence_end": k == 1}}))

        # a stream: a decoupled model's three answers as events
        st, _, out = post("/v2/models/identity/infer_stream", json.dumps(
            {"inputs": [{"name": "INPUT0", "datatype": "FP32",
                         "shape": [1], "data": [1]}]}))
        assert st == 200 and out.count(b"data: ") == 3, (st, out)

        # the nine are counted in their log phase, after their answers
        def counted(text):
            return sum(s.value for fam in
                       text_string_to_metric_families(text)
                       for s in fam.samples
                       if s.name == "oip_requests_total") >= 9 \
                and "oip_sequences_total{" in text \
                and "oip_stream_events_total{" in text

        cls.scrape = wait_for(
            lambda: cls.ngx.request("GET", "/metrics")[2].decode(), counted)
        assert counted(cls.scrape), cls.scrape
        cls.written = set()
        for fam in text_string_to_metric_families(cls.scrape):
            for s in fam.samples:
                cls.written.add(s.name)

    def test_every_family_written(self):
        want = (FAMILIES - HISTOGRAMS) | {
            h + "_" + s for h in HISTOGRAMS
            for s in ("bucket", "sum", "count")}
        self.assertLessEqual(want, self.written)
        lint = subprocess.run(["promtool", "check", "metrics"],
                              input=self.scrape.encode(),
                              capture_output=True)
        self.assertEqual(lint.returncode, 0, lint.stdout + lint.stderr)

    def test_alert_rules(self):
        r = subprocess.run(["promtool", "check", "rules", RULES],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        exprs = rule_exprs()
        with open(RULES) as f:
            self.assertEqual(len(exprs), f.read().count("alert: "))
        used = set()
        for e in exprs:
            used |= metric_names(e)
        self.assertTrue(used)
        self.assertLessEqual(used, self.written)

    def test_dashboard(self):
        exprs = dashboard_exprs()
        used = set()
        for e in exprs:
            used |= metric_names(e)
        self.assertLessEqual(used, self.written)
        # each family the module writes has a panel
        self.assertLessEqual(FAMILIES - HISTOGRAMS, used)
        self.assertLessEqual({h + "_bucket" for h in HISTOGRAMS}, used)
        # Grafana's variables filled in, each query is PromQL to promtool
        rules = {"groups": [{"name": "dashboard", "rules": [
            {"record": "oip:panel_%d" % i,
             "expr": e.replace("$__rate_interval", "5m")
                      .replace("$model", ".*")}
            for i, e in enumerate(exprs)]}]}
        with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
            json.dump(rules, f)          # JSON is YAML
            f.flush()
            r = subprocess.run(["promtool", "check", "rules", f.name],
                               capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_access_log_is_json(self):
        path = os.path.join(self.ngx.dir, "oip-access.log")
        deadline = time.time() + 5 * SLOW
        lines = []
        while time.time() < deadline and len(lines) < 6:
            if os.path.exists(path):
                with open(path) as f:
                    lines = f.read().splitlines()
            time.sleep(0.05)
        docs = [json.loads(l) for l in lines]
        hits = [d for d in docs if d["cache"] == "HIT"]
        self.assertEqual(len(hits), 1, docs)
        self.assertEqual((hits[0]["model"], hits[0]["in"],
                          hits[0]["upstream"]), ("simple", "json", "binary"))
        self.assertRegex(hits[0]["digest"], "^[0-9a-f]{64}$")
        refused = [d for d in docs if d["status"] in (400, 404)]
        self.assertEqual(len(refused), 4, docs)
        self.assertTrue(all(d["error"] and d["model"] for d in refused),
                        refused)


if __name__ == "__main__":
    run_tests()
