#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""oip_thread_pool: conversions above the threshold run in an nginx
thread pool.  What reaches the upstream and what reaches the client is
byte for byte what the worker itself makes; refusals are the same; the
debug log shows which conversions went to a thread; a client that goes
away while its tensors are converted, and a reload while the pool is
busy, leave the workers alive and nothing in the log; the directive's
configuration errors are clear."""

import http.client
import json
import os
import random
import re
import socket
import struct
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import (MODULE, SINGLE, SLOW, GatewayTestCase, IHCL,
                     run_tests, unhurried, wait_for)
from test_examples import nginx_t

MAIN = "thread_pool oip threads=2;"

HTTP = """
log_format threads '$request_uri $status $oip_digest $oip_upstream_form';
"""


def location(path, upstream, pool, extra=""):
    return """
        location /%s/ {{
            oip on;
            oip_upstream_inputs binary;
            oip_upstream_outputs binary;
            %s
            %s
            proxy_pass http://127.0.0.1:{%s}/;
        }}
""" % (path, pool, extra, upstream)


def fp32_request(n, seed, ident=None):
    rnd = random.Random(seed)
    doc = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [n],
                       "data": [round(rnd.uniform(-1e3, 1e3), 3)
                                for _ in range(n)]}]}
    if ident:
        doc["id"] = ident
    return json.dumps(doc).encode()


class Threads(GatewayTestCase):

    @classmethod
    def setUpGateway(cls):
        cls.rt = cls.start_runtime("triton")
        cls.rec = cls.start_recorder()
        server = """
        access_log {dir}/threads.log threads;
        client_max_body_size 64m;
""" + "".join([
            location("thread", "rt", "oip_thread_pool oip threshold=1k;"),
            location("inline", "rt", ""),
            location("rthread", "rec", "oip_thread_pool oip threshold=1k;"),
            location("rinline", "rec", ""),
            location("big", "rt", "oip_thread_pool oip threshold=10m;"),
            location("default", "rt", "oip_thread_pool default;"),
            location("off", "rt", "oip_thread_pool off;"),
            location("gone", "rt", "oip_thread_pool oip threshold=1k;",
                     "proxy_ignore_client_abort on;"),
        ])
        # a location inheriting its parent's pool
        server += """
        location /inherit/ {{
            oip_thread_pool oip threshold=1k;
            location /inherit/v2/ {{
                oip on;
                oip_upstream_inputs binary;
                oip_upstream_outputs binary;
                proxy_pass http://127.0.0.1:{rt}/v2/;
            }}
        }}
"""
        cls.ngx = cls.start_nginx(server, main=MAIN, http=HTTP,
                                  log_level="debug", rt=cls.rt.port,
                                  rec=cls.rec.port)

    def threaded(self, fn, least=0):
        """fn's result, and how many conversions went to a thread while
        it ran (from the debug log).  A conversion is logged before its
        answer is sent; for clients that left, it ends when it ends: the
        count is waited for until it reaches least."""
        path = os.path.join(self.ngx.dir, "error.log")
        start = os.path.getsize(path)
        out = fn()

        def count():
            with open(path, errors="replace") as f:
                f.seek(start)
                text = f.read()
            return len(re.findall(r"oip: (request|answer) of \d+ bytes "
                                  r"converted in a thread", text))

        return out, wait_for(count, lambda n: n >= least)

    def test_request_bytes_identical(self):
        """The upstream gets the same bytes, converted in a thread or
        not; the client the same answer."""
        body = fp32_request(20000, 1, ident="same")
        got = {}
        for path in ("rthread", "rinline"):
            self.rec.clear()
            (st, _, out), n = self.threaded(lambda: self.ngx.post(
                "/%s/v2/models/m/infer" % path, body))
            self.assertEqual(st, 200, out)
            self.assertEqual(n, 1 if path == "rthread" else 0)
            req = self.rec.last()
            got[path] = (req["body"], req["headers"].get(IHCL.lower()))
        self.assertEqual(got["rthread"], got["rinline"])
        self.assertIsNotNone(got["rthread"][1])     # binary, converted

    def test_answer_bytes_identical(self):
        """Both ways through the runtime: request and answer in a thread,
        the client's answer as the worker makes it."""
        body = fp32_request(30000, 2, ident="both")
        answers = {}
        for path in ("thread", "inline", "default", "inherit", "off"):
            (st, hdrs, out), n = self.threaded(lambda: self.ngx.post(
                "/%s/v2/models/identity/infer" % path, body))
            self.assertEqual(st, 200, out)
            # the default threshold, 256k: the request, not its answer
            self.assertEqual(n, {"thread": 2, "inherit": 2, "default": 1,
                                 "inline": 0, "off": 0}[path], path)
            answers[path] = (out, hdrs.get("content-type"),
                             hdrs.get("content-length"))
        for path in ("inline", "default", "inherit", "off"):
            self.assertEqual(answers["thread"], answers[path], path)
        doc = json.loads(answers["thread"][0])
        self.assertEqual(doc["id"], "both")
        self.assertEqual(len(doc["outputs"][0]["data"]), 30000)

    def test_threshold(self):
        small = fp32_request(10, 3)
        (st, _, out), n = self.threaded(lambda: self.ngx.post(
            "/thread/v2/models/identity/infer", small))
        self.assertEqual((st, n), (200, 0), out)      # under 1k: inline
        big = fp32_request(20000, 4)
        (st, _, out), n = self.threaded(lambda: self.ngx.post(
            "/big/v2/models/identity/infer", big))
        self.assertEqual((st, n), (200, 0), out)      # under 10m: inline

    def test_refusal_in_a_thread(self):
        body = fp32_request(20000, 5)
        bad = body.replace(b'"shape": [20000]', b'"shape": [20001]')
        for path in ("thread", "inline"):
            (resp, n) = self.threaded(lambda: self.ngx.post(
                "/%s/v2/models/identity/infer" % path, bad))
            self.assertJSONError(resp, 400, "INPUT0")
            self.assertEqual(n, 1 if path == "thread" else 0)
        self.assertEqual(self.ngx.post("/thread/v2/models/identity/infer",
                                       bad)[2],
                         self.ngx.post("/inline/v2/models/identity/infer",
                                       bad)[2])

    def test_digest_and_variables(self):
        body = fp32_request(20000, 6)
        uris = {}
        for path in ("thread", "inline"):
            uris[path] = "/%s/v2/models/identity/infer?%d" % (
                path, time.monotonic_ns())
            self.assertEqual(self.ngx.post(uris[path], body)[0], 200)
        lines = {}
        deadline = time.time() + 5 * SLOW
        while time.time() < deadline and len(lines) < 2:
            with open(os.path.join(self.ngx.dir, "threads.log")) as f:
                for line in f:
                    uri, st, digest, form = line.split()
                    if uri in uris.values():
                        lines[uri.split("/")[1]] = (st, digest, form)
            time.sleep(0.05)
        self.assertEqual(lines["thread"], lines["inline"])
        self.assertRegex(lines["thread"][1], r"^[0-9a-f]{64}$")
        self.assertEqual(lines["thread"][2], "binary")

    def test_many_at_once(self):
        """More conversions than threads, interleaved with small
        requests: each answer right."""
        results = []

        def one(i):
            n = 20000 if i % 2 else 5
            body = fp32_request(n, 100 + i, ident="c%d" % i)
            st, _, out = self.ngx.post("/thread/v2/models/identity/infer",
                                       body)
            doc = json.loads(out)
            results.append((st, doc.get("id"), len(doc["outputs"][0]["data"])
                            if st == 200 else None, n))

        ts = [threading.Thread(target=one, args=(i,)) for i in range(12)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(len(results), 12)
        for st, ident, got, n in results:
            self.assertEqual((st, got), (200, n), ident)

    def test_client_gone_mid_conversion(self):
        """Clients send a big request and go: each conversion ends in its
        thread, its request with it, the worker lives on.  With
        proxy_ignore_client_abort, the answer is converted for nobody
        too."""
        workers = self.ngx.workers()

        access = os.path.join(self.ngx.dir, "threads.log")

        def logged(path):
            with open(access) as f:
                return sum(l.startswith("/%s/" % path) for l in f)

        def gone(path, n):
            body = fp32_request(n, 7)
            head = ("POST /%s/v2/models/identity/infer HTTP/1.1\r\n"
                    "Host: x\r\nContent-Length: %d\r\n\r\n"
                    % (path, len(body))).encode()
            before = logged(path)
            for _ in range(3):
                s = socket.create_connection(("127.0.0.1", self.ngx.port))
                s.sendall(head + body)
                s.close()
            # each request ends, conversions and all, before its log line
            self.assertEqual(wait_for(lambda: logged(path),
                                      lambda k: k >= before + 3),
                             before + 3)

        _, n = self.threaded(lambda: gone("thread", 300000))
        self.assertGreaterEqual(n, 3)
        _, n = self.threaded(lambda: gone("gone", 50000))
        self.assertEqual(n, 6)                  # requests and answers
        self.assertEqual(self.ngx.workers(), workers)
        st, _, out = self.ngx.post("/thread/v2/models/identity/infer",
                                   fp32_request(20000, 8))
        self.assertEqual(st, 200, out)


class Families(GatewayTestCase):
    """In front of each runtime family, in its own form (MLServer: JSON
    only), JSON and binary clients: what the pool makes is what the
    worker makes, both ways converted in threads."""

    FAMILIES = ["triton", "kserve", "openvino", "mlserver"]

    @classmethod
    def setUpGateway(cls):
        cls.rts = {f: cls.start_runtime(f) for f in cls.FAMILIES}
        server = "client_max_body_size 64m;"
        for f in cls.FAMILIES:
            form = "json" if f == "mlserver" else "binary"
            for path, pool in (("t-" + f, "oip_thread_pool oip "
                                "threshold=1k;"), ("i-" + f, "")):
                server += location(path, f, pool).replace(
                    "inputs binary", "inputs " + form).replace(
                    "outputs binary", "outputs " + form)
        cls.ngx = cls.start_nginx(server, main=MAIN, **{
            f: cls.rts[f].port for f in cls.FAMILIES})

    def test_each_family(self):
        body = fp32_request(20000, 11, ident="fam")
        binary = pack_binary(20000, 11)
        for f in self.FAMILIES:
            for req, hdrs in ((body, {}), binary):
                with self.subTest(family=f, binary=bool(hdrs)):
                    got = []
                    for path in ("t-" + f, "i-" + f):
                        st, h, out = self.ngx.post(
                            "/%s/v2/models/identity/infer" % path, req, hdrs)
                        self.assertEqual(st, 200, out)
                        got.append((out, h.get("content-type"),
                                    h.get(IHCL.lower())))
                    self.assertEqual(got[0], got[1])


def pack_binary(n, seed):
    """The same tensor as fp32_request(n, seed), as a binary request."""
    doc = json.loads(fp32_request(n, seed, ident="fam"))
    data = doc["inputs"][0].pop("data")
    doc["inputs"][0]["parameters"] = {"binary_data_size": 4 * n}
    header = json.dumps(doc).encode()
    return (header + struct.pack("<%df" % n, *data),
            {IHCL: str(len(header))})


@unhurried
class Reload(GatewayTestCase):
    """A reload while the pool is busy: requests under way finish on the
    old workers, new ones go to the new workers, nobody gets an error."""

    @classmethod
    def setUpGateway(cls):
        cls.rt = cls.start_runtime("triton")
        cls.ngx = cls.start_nginx(
            "client_max_body_size 64m;"
            + location("thread", "rt", "oip_thread_pool oip threshold=1k;"),
            main=MAIN, workers=2, rt=cls.rt.port)

    @unittest.skipIf(SINGLE, "no reload without a master process")
    def test_reload_under_load(self):
        stop = time.time() + 3 * SLOW
        errors, done = [], [0]
        body = fp32_request(100000, 9)

        def client():
            while time.time() < stop:
                try:
                    conn = http.client.HTTPConnection(
                        "127.0.0.1", self.ngx.port, timeout=30 * SLOW)
                    conn.request("POST", "/thread/v2/models/identity/infer",
                                 body)
                    r = conn.getresponse()
                    data = r.read()
                    conn.close()
                    if r.status != 200 or len(json.loads(data)["outputs"][0]
                                              ["data"]) != 100000:
                        errors.append((r.status, data[:200]))
                    done[0] += 1
                except (OSError, http.client.HTTPException) as e:
                    errors.append(repr(e))

        ts = [threading.Thread(target=client) for _ in range(4)]
        for t in ts:
            t.start()
        old = self.ngx.workers()
        for _ in range(2):
            time.sleep(0.7 * SLOW)
            self.ngx.proc.send_signal(1)            # SIGHUP
        for t in ts:
            t.join()
        self.assertEqual(errors, [])
        self.assertGreater(done[0], 4)
        deadline = time.time() + 15 * SLOW
        while set(old) & set(self.ngx.workers()) and time.time() < deadline:
            time.sleep(0.1)
        self.assertFalse(set(old) & set(self.ngx.workers()))


class Config(unittest.TestCase):

    def conf(self, main, loc):
        return """
%s
load_module %s;
events { }
http {
    server {
        listen 127.0.0.1:1;
        location / {
            oip on;
            %s
            proxy_pass http://127.0.0.1:2;
        }
    }
}
""" % (main, MODULE, loc)

    def test_errors(self):
        for main, loc, err in (
                ("", "oip_thread_pool nosuch;", 'unknown thread pool "nosuch"'),
                (MAIN, "oip_thread_pool oip threshold=big;",
                 'invalid threshold "threshold=big"'),
                (MAIN, "oip_thread_pool oip size=1;",
                 'invalid parameter "size=1"'),
                (MAIN, "oip_thread_pool off threshold=1;",
                 'takes no parameters with "off"'),
                (MAIN, "oip_thread_pool oip; oip_thread_pool oip;",
                 "is duplicate")):
            with self.subTest(loc=loc):
                rc, out = nginx_t(self.conf(main, loc))
                self.assertNotEqual(rc, 0)
                self.assertIn(err, out)

    def test_valid(self):
        for main, loc in (("", "oip_thread_pool default;"),
                          (MAIN, "oip_thread_pool oip threshold=64k;"),
                          ("", "oip_thread_pool off;")):
            with self.subTest(loc=loc):
                rc, out = nginx_t(self.conf(main, loc))
                self.assertEqual(rc, 0, out)


if __name__ == "__main__":
    run_tests()
