#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""Stateful sequences kept on their runtime (issue 29): oip_sequence in
upstream {}, through real nginx with two workers, two gateways (separate
nginx instances and zones) in front of several example runtimes, each
of which lists the infer requests it read, with their parameters
(/_test/arrivals): a sequence's requests must all be at one of them.

1. Pinning: sequences of integer and string ids, each request sent
   through either gateway at random, all at one runtime; the runtimes
   share the sequences; requests without a sequence go round robin.
2. A reload that adds a runtime moves no sequence; new ones reach it.
3. A runtime killed: each of its sequences gets the documented 503 and
   never reaches another runtime, until it starts anew; the others go on.
4. Runtimes on Triton's sequence batcher (the example runtime's
   /_test/sequences): a sequence its runtime does not know gets Triton's
   START-flag 400, given as the documented 503, and is lost until it
   starts anew; elsewhere that 400 stays the runtime's.
5. Bad values of the directive.
"""

import json
import os
import random
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import (MODULE, PASS, QUICK, GatewayTestCase, heavy, run_tests,
                     wait_for)
from test_examples import nginx_t
from test_signatures import Hooks

MODEL = "identity"
URI = "/v2/models/%s/infer" % MODEL
# requests a sequence, fewer in the sanitizer and valgrind passes and in
# ./build.sh check: the sequences are as many (their spread is checked)
LENGTH = 8 if PASS == "plain" and not QUICK else 4


def doc(sid=None, start=False, end=False, n=0):
    params = {"n": n}
    if sid is not None:
        params["sequence_id"] = sid
    if start:
        params["sequence_start"] = True
    if end:
        params["sequence_end"] = True
    return json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32",
                                   "shape": [1], "data": [1.5]}],
                       "parameters": params})


def upstream(ports, zone="seq", extra=""):
    """An upstream block of the runtimes, balanced by oip_sequence."""
    return """
        upstream runtimes {
            oip_sequence zone=%s:1m%s;
            %s
        }""" % (zone, extra, "\n            ".join(
        "server 127.0.0.1:%d;" % p for p in ports))


SERVER = """
        location / {{
            oip on;
            proxy_pass http://runtimes;
        }}
        access_log {dir}/seq.log seq;
"""

LOG = """
        log_format seq '$oip_sequence_id $upstream_addr $status';
"""


class Base(GatewayTestCase):

    @classmethod
    def gateway(cls, ports, zone="seq"):
        http = (upstream(ports, zone).replace("{", "{{").replace("}", "}}")
                + LOG)
        return cls.start_nginx(SERVER, http=http, workers=2)

    def seen(self, runtimes):
        """{sequence id: set of runtime indexes that read a request of
        it}, and the count of requests without one, per runtime."""
        where, plain = {}, []
        for i, rt in enumerate(runtimes):
            n = 0
            for a in Hooks(rt.port).call("GET", "arrivals").get(MODEL, []):
                sid = (a["parameters"] or {}).get("sequence_id")
                if sid is None:
                    n += 1
                else:
                    where.setdefault(json.dumps(sid), set()).add(i)
            plain.append(n)
        return where, plain

    def sequence(self, gateways, sid, n, rnd, statuses):
        """n requests of one sequence, each through a gateway at random."""
        for k in range(n):
            ngx = rnd.choice(gateways)
            st, _, out = ngx.post(URI, doc(sid, k == 0, k == n - 1, k))
            statuses.append((sid, k, st, out))


class Sequences(Base):

    @classmethod
    def setUpGateway(cls):
        cls.rts = [cls.start_runtime() for _ in range(3)]
        ports = [rt.port for rt in cls.rts]
        cls.a = cls.gateway(ports)
        cls.b = cls.gateway(ports)

    def setUp(self):
        for rt in self.rts:
            Hooks(rt.port).call("POST", "reset")

    def test_pinned_across_gateways(self):
        ids = list(range(1, 21)) + ["s%d" % i for i in range(20)] + ["1"]
        statuses = []
        threads = []
        for i, sid in enumerate(ids):
            t = threading.Thread(target=self.sequence,
                                 args=([self.a, self.b], sid, LENGTH,
                                       random.Random(i), statuses))
            threads.append(t)
            t.start()
        for t in threads:
            t.join()
        bad = [s for s in statuses if s[2] != 200]
        self.assertEqual(bad, [])
        where, _ = self.seen(self.rts)
        self.assertEqual(len(where), len(ids))
        for sid, runtimes in where.items():
            self.assertEqual(len(runtimes), 1, sid)
        used = set().union(*where.values())
        self.assertEqual(used, {0, 1, 2})

    def test_without_a_sequence_round_robin(self):
        for n in range(30):
            gw = self.a if n % 2 else self.b
            st, _, out = gw.post(URI, doc(n=n))
            self.assertEqual(st, 200, out)
        _, plain = self.seen(self.rts)
        self.assertEqual(sum(plain), 30)
        for n in plain:
            self.assertGreaterEqual(n, 6)

    def test_id_types_and_models(self):
        """1 and "1" are two sequences (both placed, each on one
        runtime); a sequence's requests naming a version stay too."""
        for sid in (7, "7"):
            for k in range(4):
                uri = ("/v2/models/%s/versions/1/infer" % MODEL if k % 2
                       else URI)
                st, _, out = self.a.post(uri, doc(sid, k == 0, k == 3, k))
                self.assertEqual(st, 200, out)
        where, _ = self.seen(self.rts)
        self.assertEqual(sorted(where), ['"7"', "7"])
        for runtimes in where.values():
            self.assertEqual(len(runtimes), 1)


class Transports(Base):
    """HTTP/2 clients, and gRPC runtimes behind grpc_pass."""

    @classmethod
    def setUpGateway(cls):
        cls.rts = [cls.start_runtime() for _ in range(2)]
        # every call of the test kept (16 by default)
        cls.grpcs = [cls.start_grpc_runtime(["--keep", "64"])
                     for _ in range(2)]
        http = (upstream([rt.port for rt in cls.rts])
                + upstream([g.port for g in cls.grpcs], zone="gseq")
                .replace("upstream runtimes", "upstream grpcs")
                ).replace("{", "{{").replace("}", "}}") + LOG
        cls.ngx = cls.start_nginx(SERVER + """
        location /g/ {{
            oip on;
            oip_upstream_protocol grpc;
            grpc_pass grpc://grpcs;
        }}""", http=http, workers=2)

    def test_http2_clients(self):
        for sid in range(1, 11):
            for k in range(4):
                st, out = self.ngx.curl(
                    "-X", "POST", "--data-binary", "@-",
                    "{base}" + URI, h2=(k % 2 == 1),
                    data=doc(sid, k == 0, k == 3, k).encode())
                self.assertEqual(st, 200, out)
        where, _ = self.seen(self.rts)
        self.assertEqual(len(where), 10)
        for runtimes in where.values():
            self.assertEqual(len(runtimes), 1)

    def test_grpc_runtimes(self):
        ins = [{"name": n, "datatype": "INT32", "shape": [1, 16],
                "data": [1] * 16} for n in ("INPUT0", "INPUT1")]
        for g in self.grpcs:
            g.hook("POST", "/_test/reset")
        for sid in list(range(1, 9)) + ["g%d" % i for i in range(8)]:
            for k in range(3):
                st, _, out = self.ngx.post(
                    "/g/v2/models/simple/infer",
                    json.dumps({"inputs": ins, "parameters": {
                        "sequence_id": sid, "sequence_start": k == 0,
                        "sequence_end": k == 2}}))
                self.assertEqual(st, 200, out)
        where = {}
        for i, g in enumerate(self.grpcs):
            for call in g.received():
                p = call.get("parameters") or {}
                if "sequence_id" in p:
                    where.setdefault(json.dumps(p["sequence_id"]["value"]),
                                     set()).add(i)
        self.assertEqual(len(where), 16)
        for runtimes in where.values():
            self.assertEqual(len(runtimes), 1)
        self.assertEqual(set().union(*where.values()), {0, 1})


class Evicted(Base):

    @classmethod
    def setUpGateway(cls):
        cls.rts = [cls.start_runtime() for _ in range(2)]
        http = (upstream([rt.port for rt in cls.rts]).replace("1m", "32k")
                .replace("{", "{{").replace("}", "}}") + LOG
                + "oip_metrics_zone zone=metrics:1m;")
        cls.ngx = cls.start_nginx(SERVER + """
        location = /metrics {{ oip_metrics; }}""", http=http, workers=2)

    @heavy
    def test_full_zone_evicts(self):
        """A 32 KB zone and 600 live sequences: every request answered,
        the least recently used pins evicted, said and counted."""
        for sid in range(600):
            st, _, out = self.ngx.post(URI, doc("sequence-%04d" % sid, True))
            self.assertEqual(st, 200, out)
        st, _, text = self.ngx.request("GET", "/metrics")
        m = re.search(r'oip_sequences_total\{model="identity",'
                      r'end="evicted"\} (\d+)', text.decode())
        self.assertTrue(m, text)
        self.assertGreater(int(m.group(1)), 100)
        self.assertIn("oip: sequence zone is full: the pin of",
                      self.ngx.log())


class Reload(Base):

    @classmethod
    def setUpGateway(cls):
        cls.rts = [cls.start_runtime() for _ in range(3)]
        cls.ngx = cls.gateway([cls.rts[0].port, cls.rts[1].port])

    @heavy
    def test_reload_adds_a_runtime(self):
        statuses = []
        # started before the reload ...
        for i in range(30):
            st, _, out = self.ngx.post(URI, doc(i + 1, True, n=0))
            self.assertEqual(st, 200, out)
        before, _ = self.seen(self.rts)
        with open(self.ngx.conf) as f:
            conf = f.read()
        conf = conf.replace(
            "server 127.0.0.1:%d;" % self.rts[1].port,
            "server 127.0.0.1:%d;\n            server 127.0.0.1:%d;"
            % (self.rts[1].port, self.rts[2].port))
        with open(self.ngx.conf, "w") as f:
            f.write(conf)
        old = set(self.ngx.workers())
        self.ngx.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: set(self.ngx.workers()),
                 lambda w: w and not (w & old))
        # ... go on where they were; new ones reach the third too
        for i in range(30):
            for k in (1, 2):
                st, _, out = self.ngx.post(URI, doc(i + 1, end=k == 2, n=k))
                statuses.append(st)
        for i in range(60):
            st, _, out = self.ngx.post(URI, doc(1000 + i, True, True))
            statuses.append(st)
        self.assertEqual(set(statuses), {200})
        where, _ = self.seen(self.rts)
        for i in range(30):
            self.assertEqual(where[str(i + 1)], before[str(i + 1)], i + 1)
        fresh = set().union(*(where[str(1000 + i)] for i in range(60)))
        self.assertIn(2, fresh)


class Lost(Base):

    @classmethod
    def setUpGateway(cls):
        cls.rts = [cls.start_runtime() for _ in range(2)]
        http = (upstream([rt.port for rt in cls.rts])
                .replace("{", "{{").replace("}", "}}") + LOG
                + "oip_metrics_zone zone=metrics:1m;")
        cls.ngx = cls.start_nginx(SERVER + """
        location = /metrics {{ oip_metrics; }}""", http=http, workers=2)

    def metrics(self):
        st, _, text = self.ngx.request("GET", "/metrics")
        self.assertEqual(st, 200)
        out = {}
        for line in text.decode().splitlines():
            if line.startswith("oip_sequences"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out

    def test_runtime_killed(self):
        ids = list(range(1, 21))
        for sid in ids:
            st, _, out = self.ngx.post(URI, doc(sid, True))
            self.assertEqual(st, 200, out)
        where, _ = self.seen(self.rts)
        on0 = sorted(int(s) for s, r in where.items() if r == {0})
        on1 = sorted(int(s) for s, r in where.items() if r == {1})
        self.assertTrue(on0 and on1, where)
        self.assertEqual(self.metrics().get(
            'oip_sequences_active{model="identity"}'), len(ids))
        self.rts[0].stop()
        # new sequences start on the runtime that is left, those the ring
        # gives the dead one too: their start never reached it, and is
        # tried again on the next peer (first, before any other request
        # tells the workers that the runtime is down)
        for sid in range(100, 120):
            st, _, out = self.ngx.post(URI, doc(sid, True, n=0))
            self.assertEqual(st, 200, out)
        for k in (1, 2):
            for sid in ids:
                st, h, out = self.ngx.post(URI, doc(sid, n=k))
                if sid in on0:
                    msg = self.assertJSONError((st, h, out), 503)
                    self.assertEqual(msg, "sequence %d of model %s: its "
                                     "runtime is unavailable; start a new "
                                     "sequence" % (sid, MODEL))
                else:
                    self.assertEqual(st, 200, out)
        # none of the lost reached the other runtime
        where, _ = self.seen(self.rts[1:])
        for sid in on0:
            self.assertNotIn(str(sid), where)
        m = self.metrics()
        self.assertEqual(m.get('oip_sequences_active{model="identity"}'),
                         len(on1) + 20)
        self.assertEqual(m.get('oip_sequences_total{model="identity",'
                               'end="lost"}'), len(on0))
        # an end's answer unpins
        st, _, out = self.ngx.post(URI, doc(on1[0], end=True, n=9))
        self.assertEqual(st, 200, out)
        m = wait_for(self.metrics, lambda m: m.get(
            'oip_sequences_total{model="identity",end="ended"}'))
        self.assertEqual(m.get('oip_sequences_total{model="identity",'
                               'end="ended"}'), 1)
        self.assertEqual(m.get('oip_sequences_active{model="identity"}'),
                         len(on1) + 20 - 1)
        # a start places a lost one anew, on the runtime that is left
        st, _, out = self.ngx.post(URI, doc(on0[0], True, n=3))
        self.assertEqual(st, 200, out)
        st, _, out = self.ngx.post(URI, doc(on0[0], n=4))
        self.assertEqual(st, 200, out)
        where, _ = self.seen(self.rts[1:])
        self.assertEqual(where[str(on0[0])], {0})
        text = self.ngx.log()
        self.assertRegex(text, r"\[warn\].*oip: sequence .* of model "
                         r"\"identity\": its runtime .* (failed|is "
                         r"unavailable): the sequence is lost")
        self.assertRegex(text, r"\[warn\].*oip: sequence .* failed before "
                         r"the start: placed anew")


class Stateful(Base):
    """Runtimes on Triton's sequence batcher: a request of a sequence
    its runtime does not know gets Triton's START-flag 400, which the
    gateway gives as the documented 503, losing the sequence (with
    keepalive, which wraps the balancer)."""

    @classmethod
    def setUpGateway(cls):
        cls.rts = [cls.start_runtime() for _ in range(2)]
        http = (upstream([rt.port for rt in cls.rts]).replace(
            "\n        }", "\n            keepalive 8;\n        }")
                .replace("{", "{{").replace("}", "}}") + LOG)
        cls.ngx = cls.start_nginx("""
        location / {{
            oip on;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass http://runtimes;
        }}
        location /pass/ {{
            oip on;
            oip_upstream_errors pass;
            proxy_pass http://runtimes/;
        }}
        location /direct/ {{
            oip on;
            proxy_pass http://127.0.0.1:{rt}/;
        }}""", http=http, workers=2, rt=cls.rts[0].port)

    def setUp(self):
        for rt in self.rts:
            Hooks(rt.port).call("POST", "reset")
            Hooks(rt.port).call("PUT", "sequences/" + MODEL, {"idle": 60})

    def reached(self):
        return sum(len(Hooks(rt.port).call("GET", "arrivals").get(MODEL, []))
                   for rt in self.rts)

    def test_unknown_to_its_runtime(self):
        for prefix, sid in (("", 501), ("/pass", 502)):
            with self.subTest(prefix=prefix):
                # never started: the ring's runtime refuses it
                resp = self.ngx.post(prefix + URI, doc(sid, n=1))
                msg = self.assertJSONError(resp, 503)
                self.assertEqual(msg, "sequence %d of model %s: its runtime "
                                 "is unavailable; start a new sequence"
                                 % (sid, MODEL))
                reached = self.reached()
                # lost: refused at the gateway, never at a runtime
                resp = self.ngx.post(prefix + URI, doc(sid, n=2))
                self.assertJSONError(resp, 503, "start a new sequence")
                self.assertEqual(self.reached(), reached)
                # a start places it anew
                for k, end in ((3, False), (4, True)):
                    st, _, out = self.ngx.post(prefix + URI,
                                               doc(sid, k == 3, end, k))
                    self.assertEqual(st, 200, out)
        self.assertRegex(self.ngx.log(), r"\[warn\].*oip: sequence .* does "
                         r"not know it: the sequence is lost")

    def test_state_kept(self):
        """The runtimes accumulate each sequence's inputs: the answers'
        running sums say that every request reached the same state."""
        sums = []
        for k, v in enumerate((1, 2, 3, 4)):
            req = {"inputs": [{"name": "INPUT0", "datatype": "FP32",
                               "shape": [1], "data": [v]}],
                   "parameters": {"sequence_id": "acc", "sequence_start":
                                  k == 0, "sequence_end": k == 3}}
            st, _, out = self.ngx.post(("/pass" if k % 2 else "") + URI,
                                       json.dumps(req))
            self.assertEqual(st, 200, out)
            sums.append(json.loads(out)["outputs"][0]["data"][0])
        self.assertEqual(sums, [1, 3, 6, 10])

    def test_runtime_words_elsewhere(self):
        """Without oip_sequence the runtime's 400 stays its own."""
        msg = self.assertJSONError(self.ngx.post("/direct" + URI,
                                                 doc(77, n=1)), 400)
        self.assertIn("must specify the START flag", msg)
        msg = self.assertJSONError(self.ngx.post(URI, doc(0, n=1)), 400)
        self.assertIn("must specify a non-zero or non-empty correlation ID",
                      msg)


class Directives(GatewayTestCase):

    @classmethod
    def setUpGateway(cls):
        pass

    def conf(self, ups):
        return ("load_module %s;\nevents {}\nhttp { %s server { listen "
                "127.0.0.1:1; location / { oip on; proxy_pass http://u; } "
                "} }\n" % (MODULE, ups))

    def test_bad_values(self):
        for ups, msg in [
                ("upstream u { oip_sequence; server 127.0.0.1:1; }",
                 "invalid number of arguments"),
                ("upstream u { oip_sequence idle=1s; server 127.0.0.1:1; }",
                 "takes zone=NAME:SIZE"),
                ("upstream u { oip_sequence zone=s:1k; server 127.0.0.1:1; }",
                 "is too small"),
                ("upstream u { oip_sequence zone=s:1m idle=0; "
                 "server 127.0.0.1:1; }", 'invalid parameter "idle=0"'),
                ("upstream u { oip_sequence zone=s:1m size=1; "
                 "server 127.0.0.1:1; }", 'invalid parameter "size=1"'),
                ("upstream u { oip_sequence zone=s:1m; oip_sequence "
                 "zone=t:1m; server 127.0.0.1:1; }", "is duplicate"),
                ("upstream u { oip_sequence zone=s:1m; "
                 "server 127.0.0.1:1 backup; }", "backup"),
                ("upstream u { oip_sequence zone=s:1m; server 127.0.0.1:1; }"
                 " upstream v { oip_sequence zone=s:1m; server 127.0.0.1:2; }",
                 "is already used"),
                ("upstream u { server 127.0.0.1:1; } server { location /x/ "
                 "{ oip_sequence zone=s:1m; } }", "is not allowed here")]:
            with self.subTest(ups=ups):
                rc, err = nginx_t(self.conf(ups))
                self.assertNotEqual(rc, 0)
                self.assertIn(msg, err)

    def test_good_values(self):
        for ups in ("upstream u { oip_sequence zone=s:1m; "
                    "server 127.0.0.1:1 weight=3; server 127.0.0.1:2 down; "
                    "keepalive 8; }",
                    "upstream u { oip_sequence zone=s:64k idle=10m; "
                    "server 127.0.0.1:1 max_fails=0; }"):
            with self.subTest(ups=ups):
                rc, err = nginx_t(self.conf(ups))
                self.assertEqual(rc, 0, err)


if __name__ == "__main__":
    run_tests()
