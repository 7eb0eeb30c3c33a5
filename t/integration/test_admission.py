#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""Admission control (issue 27): oip_admission_zone and oip_admit, through
real nginx with two workers in front of the example runtime, whose
/_test/service hook gives a model a service time and instances and whose
/_test/highwater hook says how many requests (and tensor bytes) it ever
had in flight at once, by its own count.

1. Budgets: the concurrency never exceeded under a burst from many
   clients, nor the bytes; a request larger than the bytes budget is a
   413; a full queue (requests or bytes) and a wait that runs out are a
   429 with Retry-After, and the runtime never sees them.
2. A client that leaves while it waits (HTTP/1.1 close, HTTP/2 reset)
   leaves the queue: the runtime never sees it; counted "cancelled".
3. The share given back exactly once on every end path: answered,
   upstream error, upstream timeout, client gone mid-upstream, thread
   pool, gRPC, signature, cache hit, error before connect, error_page.
4. A reload under load; a worker killed with SIGKILL while it holds
   shares: the survivors reclaim them.
5. Bad values of every directive (oip_priority and oip_admit's levels
   too; their behaviour is test_priority.py's).
"""

import http.client
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import (MODULE, SINGLE, SLOW, GatewayTestCase, Nginx, heavy,
                     plain_only, run_tests, unhurried, wait_for)
from test_examples import nginx_t
from test_signatures import META, Hooks

SIG = [{"name": "INPUT0", "datatype": "FP32", "shape": [-1]}]


def body(n=4):
    """An infer request of n FP32 elements: 4n tensor bytes."""
    return json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32",
                                   "shape": [n], "data": [1.5] * n}]})


def loc(path, admit, extra="", upstream="http://127.0.0.1:{rt}/",
        zone="adm"):
    return """
        location /%s/ {{
            oip on;
            oip_admit zone=%s %s;
            %s
            proxy_pass %s;
        }}""" % (path, zone, admit, extra, upstream)


def h2_frame(kind, flags, stream, payload=b""):
    return (struct.pack(">I", len(payload))[1:] + bytes([kind, flags])
            + struct.pack(">I", stream) + payload)


def h2_literal(name, value):
    """An HPACK header field, literal without indexing, a new name."""
    out = b"\x00"
    for s in (name, value):
        assert len(s) < 127
        out += bytes([len(s)]) + s.encode()
    return out


ENDS = "key=ends concurrency=1 queue=4 wait=5s"


class Admission(GatewayTestCase):

    @classmethod
    def setUpGateway(cls):
        cls.rt = cls.start_runtime()
        cls.hooks = Hooks(cls.rt.port)
        cls.grpc = cls.start_grpc_runtime()
        dead = socket.socket()
        dead.bind(("127.0.0.1", 0))
        cls.dead = dead.getsockname()[1]
        cls._dead = dead           # bound, never listening: refused
        server = "".join([
            """
        access_log {dir}/adm.log adm;
        location /metrics {{ oip_metrics; }}
        location @fallback {{
            rewrite ^/end_redirect(/.*)$ $1 break;
            proxy_pass http://127.0.0.1:{rt};
        }}
        location /_oip_metaend_sig/ {{
            internal;
            proxy_pass http://127.0.0.1:{rt}/;
            proxy_pass_request_body off;
            proxy_pass_request_headers off;
            proxy_set_header Content-Length "";
            subrequest_output_buffer_size 64k;
        }}""",
            loc("conc", "concurrency=2 queue=64 wait=20s"),
            loc("bytes", "bytes=1000 queue=64 queue_bytes=10k wait=20s"),
            loc("q1", "concurrency=1 queue=1 wait=20s"),
            loc("qb", "concurrency=1 queue_bytes=500 wait=20s"),
            loc("wait", "concurrency=1 wait=500ms"),
            loc("cancel", "concurrency=1 queue=8 wait=20s"),
            loc("tenant", "key=$http_x_tenant concurrency=1 wait=0"),
            loc("end_ok", ENDS),
            loc("end_slow", ENDS, "proxy_read_timeout 300ms;"),
            loc("end_thread", ENDS, "oip_thread_pool default threshold=1;"),
            loc("end_sig", ENDS,
                "oip_signatures /_oip_metaend_sig zone=sigs;"),
            loc("end_refetch", ENDS,
                "oip_signatures /_oip_metaend_sig zone=sigs;"),
            loc("keys", "key=$http_x_key concurrency=1 wait=0",
                zone="small"),
            loc("end_cache", ENDS,
                "proxy_cache infer; proxy_cache_methods POST; "
                "proxy_cache_valid 200 10m; "
                'proxy_cache_key "$oip_digest";'),
            loc("end_refused", ENDS, upstream="http://127.0.0.1:%d/"
                % cls.dead),
            loc("end_redirect", ENDS,
                "error_page 502 = @fallback; proxy_intercept_errors on;",
                upstream="http://127.0.0.1:%d" % cls.dead),
            loc("end_grpc", ENDS, "oip_upstream_protocol grpc;",
                upstream="grpc://127.0.0.1:{grpc}")])
        server = server.replace("proxy_pass grpc:", "grpc_pass grpc:")
        cls.ngx = cls.start_nginx(server, workers=2, http="""
            oip_admission_zone zone=adm:1m;
            oip_admission_zone zone=small:32k;
            oip_metrics_zone zone=metrics:1m;
            oip_signature_zone zone=sigs:1m;
            proxy_cache_path {dir}/cache keys_zone=infer:1m;
            log_format adm '$oip_model $status $oip_admission '
                           '$oip_queue_time $oip_handover_time';
            """, rt=cls.rt.port, grpc=cls.grpc.port)
        for m in ("cm", "bm", "qm", "qbm", "wm", "xm", "tm", "m_ok",
                  "m_slow", "m_thread", "m_sig", "m_cache", "m_gone",
                  "km", "m_refetch"):
            cls.hooks.call("PUT", "models/" + m, {"inputs": SIG,
                                                  "outputs": SIG})

    def setUp(self):
        self.hooks.call("POST", "highwater/reset")

    # helpers

    def post(self, path, model, n=4, timeout=30, headers=None):
        return self.ngx.post("/%s/v2/models/%s/infer" % (path, model),
                             body(n), headers, timeout=timeout)

    def service(self, model, seconds, instances=8):
        self.hooks.call("PUT", "service/" + model,
                        {"seconds": seconds, "instances": instances})

    def highwater(self, model):
        return self.hooks.call("GET", "highwater").get(model, {})

    def infers(self, model):
        return self.hooks.counts()["infer"].get(model, 0)

    def metrics(self):
        st, _, text = self.ngx.request("GET", "/metrics")
        self.assertEqual(st, 200)
        out = {}
        for line in text.decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out

    def inflight(self):
        return sum(v for k, v in self.metrics().items()
                   if k.startswith("oip_inflight_requests{"))

    def log_lines(self, model):
        path = os.path.join(self.ngx.dir, "adm.log")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [l.split() for l in f if l.split()[0] == model]

    def burst(self, path, model, clients, n=4):
        """clients requests at once, each from its own thread: statuses."""
        out = [None] * clients

        def one(i):
            out[i] = self.post(path, model, n)

        threads = [threading.Thread(target=one, args=(i,))
                   for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return out

    def background(self, path, model, n=4, timeout=30, headers=None):
        """One request in a thread: (thread, box of its answer)."""
        box = []

        def one():
            try:
                box.append(self.post(path, model, n, timeout=timeout,
                                     headers=headers))
            except OSError as e:
                box.append(e)

        t = threading.Thread(target=one)
        t.start()
        return t, box

    def leave(self, path, model, after):
        """A client that leaves after some seconds, whatever the pass
        (Nginx.request stretches its timeout under valgrind)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.ngx.port,
                                          timeout=after)
        try:
            conn.request("POST", "/%s/v2/models/%s/infer" % (path, model),
                         body())
            conn.getresponse().read()
        except OSError:
            pass
        finally:
            conn.close()

    def running(self, model, n):
        """Waits until the runtime has n of model's requests in flight."""
        got = wait_for(lambda: self.highwater(model).get("now", 0),
                       lambda v: v >= n)
        self.assertGreaterEqual(got, n)

    # 1. budgets

    def test_concurrency_never_exceeded(self):
        self.service("cm", 0.1)
        answers = self.burst("conc", "cm", 10)
        self.assertEqual([a[0] for a in answers], [200] * 10)
        self.assertEqual(self.highwater("cm")["concurrent"], 2)
        lines = wait_for(lambda: self.log_lines("cm"),
                         lambda v: len(v) >= 10)
        results = sorted(l[2] for l in lines)
        self.assertEqual(len(results), 10)
        self.assertEqual(results.count("admitted") + results.count("queued"),
                         10)
        self.assertGreaterEqual(results.count("queued"), 1)
        for l in lines:
            if l[2] == "queued":
                self.assertRegex(l[3], r"^\d+\.\d{3}$")
                self.assertRegex(l[4], r"^\d+\.\d{6}$")
            else:
                self.assertEqual(l[3], "0.000")
                self.assertEqual(l[4], "-")

    def test_bytes_never_exceeded(self):
        """bytes=1000: two requests of 400 tensor bytes at once."""
        self.service("bm", 0.1)
        answers = self.burst("bytes", "bm", 8, n=100)
        self.assertEqual([a[0] for a in answers], [200] * 8)
        hw = self.highwater("bm")
        self.assertEqual(hw["bytes"], 800)
        self.assertEqual(hw["concurrent"], 2)

    def test_larger_than_the_budget(self):
        before = self.infers("bm")
        msg = self.assertJSONError(self.post("bytes", "bm", 300), 413)
        self.assertEqual(msg, "a request of 1200 tensor bytes is larger "
                         "than model 'bm''s admission budget (bytes=1000)")
        self.assertEqual(self.infers("bm"), before)

    def full(self, path, model, n):
        """The first holds, one of the next two waits, the other is
        refused (which one depends on which worker is faster)."""
        self.service(model, 0.6)
        first = self.background(path, model, n)
        self.running(model, 1)
        others = [self.background(path, model, n) for _ in range(2)]
        for t, _ in [first] + others:
            t.join()
        self.assertEqual(first[1][0][0], 200)
        answers = sorted((b[0] for _, b in others), key=lambda a: a[0])
        self.assertEqual([a[0] for a in answers], [200, 429])
        st, headers, data = answers[1]
        self.assertRegex(headers.get("retry-after", ""), r"^[1-9]\d*$")
        self.assertEqual(self.highwater(model)["concurrent"], 1)
        self.assertEqual(self.highwater(model)["served"], 2)
        return self.assertJSONError(answers[1], 429)

    @unhurried
    def test_queue_full(self):
        msg = self.full("q1", "qm", 4)
        self.assertEqual(msg, "model 'qm' is over its admission budget "
                         "(concurrency=1): 1 in flight, and the queue is "
                         "full (1 waiting)")

    @plain_only
    def test_queue_bytes_full(self):
        """queue_bytes=500: one request of 400 bytes waits, not two."""
        msg = self.full("qb", "qbm", 100)
        self.assertIn("the queue is full (1 waiting)", msg)

    def test_wait_runs_out(self):
        self.service("wm", 0.9)
        first = self.background("wait", "wm")
        self.running("wm", 1)
        t0 = time.time()
        resp = self.post("wait", "wm")
        took = time.time() - t0
        msg = self.assertJSONError(resp, 429)
        self.assertRegex(msg, r"^model 'wm' waited \d+ ms for its admission "
                         r"budget \(concurrency=1\) and was not admitted$")
        self.assertRegex(resp[1].get("retry-after", ""), r"^[1-9]\d*$")
        self.assertGreaterEqual(took, 0.45)
        self.assertLess(took, 0.85 * SLOW)
        first[0].join()
        self.assertEqual(first[1][0][0], 200)
        self.assertEqual(self.highwater("wm")["served"], 1)
        lines = wait_for(lambda: [l for l in self.log_lines("wm")
                                  if l[1] == "429"])
        self.assertEqual(lines[0][2], "timeout")

    def test_key_and_empty_key(self):
        """key=$http_x_tenant: each tenant its budget; none, no limit."""
        self.service("tm", 0.6)
        a = self.background("tenant", "tm", headers={"X-Tenant": "a"})
        self.running("tm", 1)
        same = self.post("tenant", "tm", headers={"X-Tenant": "a"})
        other = self.background("tenant", "tm", headers={"X-Tenant": "b"})
        none = self.background("tenant", "tm")
        for t, _ in (a, other, none):
            t.join()
        self.assertJSONError(same, 429, "model 'tm' is over its admission "
                             "budget (concurrency=1)")
        self.assertEqual([x[1][0][0] for x in (a, other, none)],
                         [200] * 3)
        self.assertEqual(self.highwater("tm")["concurrent"], 3)

    # 2. cancellation while waiting

    def cancelled(self, leave):
        """leave() sends a request that leaves while it waits: it is
        never at the runtime, and logged "cancelled" with a 499."""
        n = len([l for l in self.log_lines("xm") if l[1] == "499"])
        self.service("xm", 1.0)
        self.hooks.call("POST", "highwater/reset")
        first = self.background("cancel", "xm")
        self.running("xm", 1)
        before = self.infers("xm")
        leave()
        first[0].join()
        self.assertEqual(first[1][0][0], 200)
        # the runtime never saw the one that left
        time.sleep(0.2)
        self.assertEqual(self.infers("xm"), before)
        self.assertEqual(self.highwater("xm")["served"], 1)
        lines = wait_for(lambda: [l for l in self.log_lines("xm")
                                  if l[1] == "499"],
                         lambda v: len(v) > n)
        self.assertEqual(lines[-1][2], "cancelled")

    @unhurried
    def test_cancelled_http11(self):
        self.cancelled(lambda: self.leave("cancel", "xm", 0.4))
        # under "_other" while the model has not earned its label yet

        def count(m, family, labels):
            return sum(v for k, v in m.items()
                       if k.startswith(family + "{") and labels in k)

        m = wait_for(self.metrics, lambda m: count(
            m, "oip_admission_total", 'result="cancelled"'))
        self.assertGreaterEqual(count(m, "oip_admission_total",
                                      'result="cancelled"'), 1)
        self.assertGreaterEqual(count(m, "oip_requests_total",
                                      'outcome="cancelled",code="499"'), 1)

    @plain_only
    def test_cancelled_http2(self):
        """The connection closed (the stream reset is in the test
        below, which the other passes run)."""
        def leave():
            subprocess.run(["curl", "-s", "-o", "/dev/null",
                            "--http2-prior-knowledge", "--max-time", "0.4",
                            "-d", body(), "http://127.0.0.1:%d/cancel/v2/"
                            "models/xm/infer" % self.ngx.h2port])
        self.cancelled(leave)

    # 3. the share given back on every end path

    def released(self, what):
        """Nothing in flight, and the next request admitted at once."""
        self.assertEqual(wait_for(self.inflight, lambda v: v == 0), 0,
                         what)
        st, _, data = self.post("end_ok", "m_ok")
        self.assertEqual(st, 200, (what, data))
        self.assertEqual(wait_for(self.inflight, lambda v: v == 0), 0,
                         what)

    def test_release_on_every_end_path(self):
        self.service("m_slow", 1.0)
        self.service("m_gone", 1.0)
        paths = [
            ("answered", lambda: self.post("end_ok", "m_ok"), 200),
            ("upstream error", lambda: self.post("end_ok", "nosuch"), 400),
            ("upstream timeout", lambda: self.post("end_slow", "m_slow"),
             504),
            ("thread pool", lambda: self.post("end_thread", "m_thread"),
             200),
            ("signature", lambda: self.post("end_sig", "m_sig"), 200),
            ("signature refetched", self.refetched, 200),
            ("cache miss", lambda: self.post("end_cache", "m_cache"), 200),
            ("cache hit", lambda: self.post("end_cache", "m_cache"), 200),
            ("error before connect",
             lambda: self.post("end_refused", "m_ok"), 502),
            ("error_page", lambda: self.post("end_redirect", "m_ok"), 200),
            ("grpc", lambda: self.ngx.post(
                "/end_grpc/v2/models/simple/infer", json.dumps(
                    {"inputs": [{"name": n, "datatype": "INT32",
                                 "shape": [1, 16], "data": [1] * 16}
                                for n in ("INPUT0", "INPUT1")]})), 200)]
        for what, call, status in paths:
            with self.subTest(path=what):
                st = call()[0]
                if what == "upstream error":
                    self.assertGreaterEqual(st, 400)
                else:
                    self.assertEqual(st, status, what)
                self.released(what)
        with self.subTest(path="client gone mid-upstream"):
            self.leave("end_ok", "m_gone", 0.3)
            self.released("client gone")
        m = self.metrics()
        self.assertGreaterEqual(m.get('oip_cache_total{model="m_cache",'
                                      'status="HIT"}', 0), 1)

    def refetched(self):
        """A model updated under the gateway: the request misfits the
        signature in the zone, which is fetched again, and fits."""
        self.assertEqual(self.post("end_refetch", "m_refetch", 4)[0], 200)
        sig = [{"name": "INPUT0", "datatype": "FP32", "shape": [3]}]
        self.hooks.call("PUT", "models/m_refetch", {"inputs": sig,
                                                   "outputs": sig})
        self.released("signature fetched")
        time.sleep(1.1)       # one refetch a second for a key
        return self.post("end_refetch", "m_refetch", 3)

    def test_gauges(self):
        self.service("cm", 0.6)
        a = self.background("conc", "cm", n=10)
        b = self.background("conc", "cm", n=10)
        self.running("cm", 2)
        m = self.metrics()
        self.assertEqual(m.get('oip_inflight_requests{model="cm"}'), 2)
        self.assertEqual(m.get('oip_inflight_bytes{model="cm"}'), 80)
        for t, _ in (a, b):
            t.join()
        self.assertEqual(wait_for(self.inflight, lambda v: v == 0), 0)
        m = self.metrics()
        self.assertEqual(m.get('oip_inflight_bytes{model="cm"}'), 0)
        self.assertIn('oip_queue_seconds_count{model="cm"}', m)

    @unhurried
    def test_cancelled_http2_stream_reset(self):
        """RST_STREAM on a connection that stays open until the runtime
        has answered the request ahead: the reset alone cancels it."""
        kept = []

        def leave():
            c = socket.create_connection(("127.0.0.1", self.ngx.h2port))
            kept.append(c)
            data = body().encode()
            c.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
                      + h2_frame(4, 0, 0)
                      + h2_frame(1, 4, 1, b"".join(
                          h2_literal(k, v) for k, v in (
                              (":method", "POST"), (":scheme", "http"),
                              (":authority", "localhost"),
                              (":path", "/cancel/v2/models/xm/infer"),
                              ("content-length", str(len(data))))))
                      + h2_frame(0, 1, 1, data))
            time.sleep(0.4)
            c.sendall(h2_frame(3, 0, 1, struct.pack(">I", 8)))

        try:
            self.cancelled(leave)
        finally:
            for c in kept:
                c.close()

    def test_zone_evicts_idle_keys(self):
        """A 32 KB zone holds some dozens of keys; idle ones make room."""
        for i in range(600):
            st, _, data = self.post("keys", "km",
                                    headers={"X-Key": "k%d" % i})
            self.assertEqual(st, 200, data)
        self.assertNotIn("admission zone is full", self.ngx.log())

    @heavy
    def test_zone_full(self):
        """Keys all holding shares: no room for another, a 429 and a line
        in the error log; room again once they end."""
        self.service("km", 1.0, instances=400)
        held = [self.background("keys", "km", headers={"X-Key": "h%d" % i})
                for i in range(200)]
        for t, _ in held:
            t.join()
        statuses = [b[0][0] for _, b in held]
        self.assertIn(429, statuses)
        self.assertGreater(statuses.count(200), 20)
        refused = [b[0] for _, b in held if b[0][0] == 429]
        self.assertJSONError(refused[0], 429, "model 'km' cannot be "
                             "admitted: the admission zone is full")
        self.assertIn("oip: admission zone is full", self.ngx.log())
        self.service("km", 0)
        self.assertEqual(self.post("keys", "km",
                                   headers={"X-Key": "after"})[0], 200)

    # 4. reload, SIGKILL

    @heavy
    def test_reload_under_load(self):
        self.service("cm", 0.3)
        out = []

        def client():
            for _ in range(4):
                out.append(self.post("conc", "cm")[0])

        threads = [threading.Thread(target=client) for _ in range(5)]
        for t in threads:
            t.start()
        self.running("cm", 2)
        self.ngx.proc.send_signal(signal.SIGHUP)
        for t in threads:
            t.join()
        self.assertEqual(out, [200] * 20)
        self.assertEqual(self.highwater("cm")["concurrent"], 2)
        self.assertEqual(wait_for(self.inflight, lambda v: v == 0), 0)


class RuntimeOverload(GatewayTestCase):
    """A runtime whose own queue is full: Triton's 503 "Exceeds maximum
    queue size", or any runtime's 429, reaches the client as a 429 with
    the runtime's Retry-After or 1, under either oip_upstream_errors;
    another 503 stays a 503."""

    @classmethod
    def setUpGateway(cls):
        cls.rt = cls.start_runtime()
        cls.hooks = Hooks(cls.rt.port)
        cls.rec = cls.start_recorder()
        cls.grpc = cls.start_grpc_runtime()
        cls.hooks.call("PUT", "models/om", {"inputs": SIG, "outputs": SIG})
        server = """
        access_log {dir}/adm.log adm;
        location /metrics {{ oip_metrics; }}
        location /rewrite/ {{
            oip on;
            proxy_pass http://127.0.0.1:{rt}/;
        }}
        location /pass/ {{
            oip on;
            oip_upstream_errors pass;
            proxy_pass http://127.0.0.1:{rt}/;
        }}
        location /rec/ {{
            oip on;
            proxy_pass http://127.0.0.1:{rec}/;
        }}
        location /recpass/ {{
            oip on;
            oip_upstream_errors pass;
            proxy_pass http://127.0.0.1:{rec}/;
        }}
        location /grpc/ {{
            oip on;
            oip_upstream_protocol grpc;
            grpc_pass grpc://127.0.0.1:{grpc};
        }}"""
        cls.ngx = cls.start_nginx(server, workers=2, http="""
            oip_metrics_zone zone=metrics:1m;
            log_format adm '$oip_model $status $oip_admission';
            """, rt=cls.rt.port, rec=cls.rec.port, grpc=cls.grpc.port)

    def post(self, path, model="om"):
        return self.ngx.post("/%s/v2/models/%s/infer" % (path, model),
                             body())

    @unhurried
    def test_triton_queue_full(self):
        for path in ("rewrite", "pass"):
            with self.subTest(path=path):
                # held while a third comes through nginx (slower under
                # valgrind)
                self.hooks.call("PUT", "service/om", {
                    "seconds": 0.4 * min(SLOW, 2.5), "instances": 1,
                    "max_queue": 1})
                self.hooks.call("POST", "highwater/reset")
                held = [threading.Thread(target=self.post, args=(path,))
                        for _ in range(2)]
                for t in held:
                    t.start()
                wait_for(lambda: self.hooks.call("GET", "highwater")
                         .get("om", {}).get("now", 0), lambda v: v >= 2)
                resp = self.post(path)
                for t in held:
                    t.join()
                self.assertJSONError(resp, 429, "[request id: <id_unknown>] "
                                     "Exceeds maximum queue size")
                self.assertEqual(resp[1].get("retry-after"), "1")
        lines = wait_for(lambda: self.log_lines("429"),
                         lambda v: len(v) >= 2)
        self.assertEqual([l[2] for l in lines], ["runtime"] * 2)
        m = wait_for(self.metrics, lambda m: m.get(
            'oip_admission_total{model="om",result="runtime"}') == 2)
        self.assertEqual(m.get(
            'oip_admission_total{model="om",result="runtime"}'), 2)

    def test_any_429(self):
        for path in ("rec", "recpass"):
            for retry in ("7", None):
                with self.subTest(path=path, retry=retry):
                    self.rec.answer = (429, {
                        "Content-Type": "application/json",
                        "Retry-After": retry}, b'{"error":"busy"}')
                    st, headers, data = self.post(path, "rm")
                    self.assertEqual(st, 429, data)
                    self.assertEqual(headers.get("retry-after"),
                                     retry or "1")
                    self.assertEqual(json.loads(data), {"error": "busy"})

    def test_grpc_unavailable(self):
        """Triton's gRPC front: UNAVAILABLE with the same words."""
        for message, status in (
                ("[request id: <id_unknown>] Exceeds maximum queue size",
                 429),
                ("Request timeout expired", 503)):
            with self.subTest(message=message):
                self.grpc.hook("PUT", "/_test/fault", {
                    "mode": "status", "code": "UNAVAILABLE",
                    "message": message, "times": 1})
                resp = self.ngx.post("/grpc/v2/models/simple/infer",
                                     json.dumps({"inputs": [
                                         {"name": n, "datatype": "INT32",
                                          "shape": [1, 16], "data": [1] * 16}
                                         for n in ("INPUT0", "INPUT1")]}))
                self.assertJSONError(resp, status, message)
                self.assertEqual(resp[1].get("retry-after"),
                                 "1" if status == 429 else None)

    def test_other_503_untouched(self):
        for path in ("rec", "recpass"):
            with self.subTest(path=path):
                self.rec.answer = (503, {"Content-Type": "application/json"},
                                   b'{"error":"Server is not ready"}')
                st, headers, data = self.post(path, "rm")
                self.assertEqual(st, 503, data)
                self.assertNotIn("retry-after", headers)
                self.assertEqual(json.loads(data),
                                 {"error": "Server is not ready"})

    def log_lines(self, status):
        path = os.path.join(self.ngx.dir, "adm.log")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [l.split() for l in f
                    if l.split()[:2] == ["om", status]]

    def metrics(self):
        st, _, text = self.ngx.request("GET", "/metrics")
        return {k: float(v) for k, v in (
            l.rsplit(" ", 1) for l in text.decode().splitlines()
            if l and not l.startswith("#"))}


@heavy
class Killed(GatewayTestCase):
    """A worker killed with SIGKILL while it holds shares: its successor
    reclaims them, and new requests are admitted."""

    @classmethod
    def setUpGateway(cls):
        cls.rt = cls.start_runtime()
        cls.hooks = Hooks(cls.rt.port)
        cls.hooks.call("PUT", "models/km", {"inputs": SIG, "outputs": SIG})

    def test_sigkill(self):
        if SINGLE:
            self.skipTest("one process: no worker to kill")
        ngx = Nginx(loc("k", "concurrency=2 wait=0"), workers=2,
                    http="oip_admission_zone zone=adm:1m;", rt=self.rt.port)
        try:
            self.hooks.call("PUT", "service/km",
                            {"seconds": 2, "instances": 8})
            hold = [threading.Thread(target=lambda: self.swallow(ngx))
                    for _ in range(2)]
            for t in hold:
                t.start()
            got = wait_for(lambda: self.hooks.call("GET", "highwater")
                           .get("km", {}).get("now", 0), lambda v: v >= 2)
            self.assertEqual(got, 2)
            # full: a third is refused at once
            st = ngx.post("/k/v2/models/km/infer", body())[0]
            self.assertEqual(st, 429)
            old = ngx.workers()
            for pid in old:
                os.kill(pid, signal.SIGKILL)
            wait_for(lambda: ngx.workers(),
                     lambda w: len(w) == 2 and not set(w) & set(old))
            # the shares of the dead are reclaimed: admitted, while the
            # runtime still runs their two requests
            st = wait_for(lambda: ngx.post("/k/v2/models/km/infer",
                                           body())[0],
                          lambda s: s == 200)
            self.assertEqual(st, 200)
            self.assertIn("reclaimed", ngx.log())
            for t in hold:
                t.join()
        finally:
            bad = ngx.stop()
        bad = [l for l in bad if not re.search(
            r"exited on signal 9|was locked by", l)]
        self.assertEqual(bad, [])

    @staticmethod
    def swallow(ngx):
        try:
            ngx.post("/k/v2/models/km/infer", body())
        except OSError:
            pass


class Directives(GatewayTestCase):

    @classmethod
    def setUpGateway(cls):
        pass

    def conf(self, http, directives):
        return ("load_module %s;\nevents {}\nhttp { %s server { listen "
                "127.0.0.1:1; location / { oip on; %s } } }\n"
                % (MODULE, http, directives))

    ZONE = "oip_admission_zone zone=adm:1m;"

    def test_bad_values(self):
        for d, msg in [
                ("oip_admit zone=adm;", "needs concurrency=N or bytes=SIZE"),
                ("oip_admit concurrency=1;", "takes zone=NAME"),
                ("oip_admit zone= concurrency=1;", 'invalid parameter "zone="'),
                ("oip_admit zone=adm concurrency=0;", "invalid parameter"),
                ("oip_admit zone=adm concurrency=x;", "invalid parameter"),
                ("oip_admit zone=adm bytes=0;", "invalid parameter"),
                ("oip_admit zone=adm bytes=lots;", "invalid parameter"),
                ("oip_admit zone=adm concurrency=1 queue=-1;",
                 "invalid parameter"),
                ("oip_admit zone=adm concurrency=1 queue_bytes=x;",
                 "invalid parameter"),
                ("oip_admit zone=adm concurrency=1 wait=soon;",
                 "invalid parameter"),
                ("oip_admit zone=adm concurrency=1 size=1;",
                 'invalid parameter "size=1"'),
                ("oip_admit zone=adm concurrency=1 wait=0 queue=4;",
                 "has queue= without a wait"),
                ("oip_admit zone=adm concurrency=1; "
                 "oip_admit zone=adm concurrency=2;", "is duplicate"),
                ("oip_admit zone=adm key=$nosuch concurrency=1;",
                 "unknown \"nosuch\" variable"),
                ("oip_admit zone=nowhere concurrency=1;",
                 "zero size shared memory zone \"nowhere\""),
                ("oip_admit zone=adm concurrency=1 levels=0;",
                 'invalid parameter "levels=0"'),
                ("oip_admit zone=adm concurrency=1 levels=x;",
                 "invalid parameter"),
                ("oip_admit zone=adm concurrency=1 default_level=0;",
                 "invalid parameter"),
                ("oip_admit zone=adm concurrency=1 default_level=3;",
                 "has default_level= above its levels="),
                ("oip_admit zone=adm concurrency=1 levels=4 "
                 "default_level=5;", "has default_level= above its levels="),
                ("oip_priority 1 2;", "invalid number of arguments"),
                ("oip_priority 1; oip_priority 2;", "is duplicate"),
                ("oip_priority $nosuch;", "unknown \"nosuch\" variable")]:
            with self.subTest(directive=d):
                rc, err = nginx_t(self.conf(self.ZONE, d))
                self.assertNotEqual(rc, 0)
                self.assertIn(msg, err)

    def test_bad_zones(self):
        for http, msg in [
                ("oip_admission_zone zone=a:8k;", "is too small"),
                ("oip_admission_zone a;", "takes zone=NAME:SIZE"),
                ("oip_admission_zone zone=a;", "takes zone=NAME:SIZE"),
                ("oip_admission_zone zone=a:1m x=1;",
                 "invalid number of arguments"),
                ("oip_admission_zone zone=a:1m; oip_admission_zone "
                 "zone=a:1m;", "is already declared"),
                ("oip_metrics_zone zone=a:1m; oip_admission_zone "
                 "zone=a:1m;", "is already declared for a different use")]:
            with self.subTest(http=http):
                rc, err = nginx_t(self.conf(http, ""))
                self.assertNotEqual(rc, 0)
                self.assertIn(msg, err)

    def test_good_values(self):
        for d in ("oip_admit zone=adm concurrency=4;",
                  "oip_admit zone=adm bytes=64m;",
                  "oip_admit off;",
                  "oip_admit zone=adm key=$oip_model$oip_model_version "
                  "concurrency=4 bytes=1g queue=0 queue_bytes=0 wait=0;",
                  "oip_admit zone=adm concurrency=1 queue=100 "
                  "queue_bytes=10m wait=1m;",
                  "oip_admit zone=adm concurrency=1 levels=5 "
                  "default_level=3;",
                  "oip_admit zone=adm concurrency=1 levels=1;",
                  "oip_priority $http_x_tier; "
                  "oip_admit zone=adm concurrency=1;"):
            with self.subTest(directive=d):
                rc, err = nginx_t(self.conf(self.ZONE, d))
                self.assertEqual(rc, 0, err)


if __name__ == "__main__":
    run_tests()
