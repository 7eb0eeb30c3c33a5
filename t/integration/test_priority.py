#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""Priorities and client deadlines on the admission queue (issue 28),
through real nginx with two workers in front of the example runtime,
whose /_test/arrivals hook lists the infer requests in the order it read
them, with their request-level parameters as received.

The budget is held by a request to an upstream of the test's own that
answers when the test says (Hold), so that who waits is known, in every
pass; the oip_queue_requests gauge says when a waiter is queued.

1. Priority order: waiters of a higher level go first, equal levels in
   arrival order, across workers.
2. oip_priority overrides the client's priority both ways; levels and the
   default level; what goes upstream (REST and gRPC's int64_param); a bad
   value from oip_priority is a 500 logged at error.
3. A full queue and a higher arrival: the lowest, latest waiter is shed.
4. Deadlines: a waiter whose deadline passes is a 504, never forwarded;
   the earlier of wait and deadline decides; what is left of the timeout
   goes upstream (REST, binary, gRPC); with under 1 ms left, a 504.
"""

import json
import os
import socket
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import (IHCL, SLOW, GatewayTestCase, binary_body, run_tests,
                     wait_for)
from test_signatures import Hooks

SIG = [{"name": "INPUT0", "datatype": "FP32", "shape": [-1]}]
MODELS = ("om", "tm", "sm", "dm", "pm")


def doc(params=None, rid=None):
    d = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1],
                     "data": [1.5]}]}
    if params is not None:
        d["parameters"] = params
    if rid is not None:
        d["id"] = rid
    return json.dumps(d)


class Hold:
    """An upstream that reads each request and answers only once the
    test releases it: a budget held for as long as a test needs."""

    ANSWER = (b'{"model_name":"hold","outputs":[]}')

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.release = threading.Event()
        self.arrived = threading.Semaphore(0)
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.one, args=(conn,),
                             daemon=True).start()

    def one(self, conn):
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v)
            while len(rest) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                rest += chunk
            self.arrived.release()
            self.release.wait(60 * SLOW)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json"
                         b"\r\nContent-Length: %d\r\nConnection: close\r\n"
                         b"\r\n" % len(self.ANSWER) + self.ANSWER)

    def stop(self):
        self.release.set()
        self.sock.close()


def loc(path, admit, extra="", upstream="http://127.0.0.1:{rt}/"):
    return """
        location /%s/ {{
            oip on;
            %s
            %s
            proxy_pass %s;
        }}""" % (path, ("oip_admit zone=adm %s;" % admit) if admit else "",
                 extra, upstream)


class Priorities(GatewayTestCase):

    @classmethod
    def setUpGateway(cls):
        cls.rt = cls.start_runtime()
        cls.hooks = Hooks(cls.rt.port)
        cls.grpc = cls.start_grpc_runtime()
        cls.hold = Hold()
        cls._stoppers.append(cls.hold.stop)
        order = "key=order concurrency=1 queue=64 wait=60s levels=3"
        shed = "key=shed concurrency=1 queue=2 wait=60s"
        dl = "key=dl concurrency=1 queue=8 wait=60s"
        server = "".join([
            """
        access_log {dir}/prio.log prio;
        location /metrics {{ oip_metrics; }}""",
            loc("order", order),
            loc("order_hold", order, upstream="http://127.0.0.1:{hold}/"),
            loc("tier", "key=tier concurrency=8 levels=3 default_level=2",
                "oip_priority $tier;"),
            loc("shed", shed),
            loc("shed_hold", shed, upstream="http://127.0.0.1:{hold}/"),
            loc("dl", dl),
            loc("dl_hold", dl, upstream="http://127.0.0.1:{hold}/"),
            loc("dlw", "key=dl concurrency=1 queue=8 wait=300ms"),
            loc("plain", None),
            loc("bad", None, "oip_priority $http_x_prio;"),
            loc("grpc", "key=g concurrency=4 levels=2",
                "oip_priority $tier; oip_upstream_protocol grpc;",
                upstream="grpc://127.0.0.1:{grpc}")])
        server = server.replace("proxy_pass grpc:", "grpc_pass grpc:")
        cls.ngx = cls.start_nginx(server, workers=2, http="""
            oip_admission_zone zone=adm:1m;
            oip_metrics_zone zone=metrics:1m;
            map $http_x_api_key $tier {{
                gold    1;
                bronze  3;
                default "";
            }}
            log_format prio '$oip_model $status $oip_admission '
                            '"$oip_priority" "$oip_timeout" $uri';
            """, rt=cls.rt.port, grpc=cls.grpc.port, hold=cls.hold.port)
        for m in MODELS:
            cls.hooks.call("PUT", "models/" + m, {"inputs": SIG,
                                                  "outputs": SIG})
            cls.ngx.post("/plain/v2/models/%s/infer" % m, doc())
        # a model is named in the metrics once one request of it has
        # been accepted (refusals alone count as _other): the gauges
        # that say who waits need that
        wait_for(lambda: cls.ngx.request("GET", "/metrics")[2].decode(),
                 lambda text: all('oip_requests_total{model="%s"' % m
                                  in text for m in MODELS))

    def setUp(self):
        self.hooks.call("POST", "reset")
        for m in MODELS:
            self.hooks.call("PUT", "models/" + m, {"inputs": SIG,
                                                  "outputs": SIG})
        self.grpc.hook("POST", "/_test/reset")
        self.hold.release.clear()

    # helpers

    def post(self, path, model, params=None, rid=None, headers=None):
        return self.ngx.post("/%s/v2/models/%s/infer" % (path, model),
                             doc(params, rid), headers, timeout=60)

    def background(self, *args, **kw):
        box = []

        def one():
            box.append(self.post(*args, **kw))

        t = threading.Thread(target=one)
        t.start()
        return t, box

    def gauge(self, name, model):
        st, _, text = self.ngx.request("GET", "/metrics")
        self.assertEqual(st, 200)
        key = '%s{model="%s"} ' % (name, model)
        for line in text.decode().splitlines():
            if line.startswith(key):
                return float(line.split()[-1])
        return 0.0

    def queued(self, model, n):
        """Waits until n of model's requests wait for their share."""
        got = wait_for(lambda: self.gauge("oip_queue_requests", model),
                       lambda v: v >= n)
        self.assertGreaterEqual(got, n)

    def held(self, path, model):
        """A request that holds its key's budget until release(): it has
        reached the Hold upstream when this returns."""
        t = self.background(path, model, rid="holder")
        self.addCleanup(self.hold.release.set)
        self.assertTrue(self.hold.arrived.acquire(timeout=30 * SLOW))
        return t

    def release(self, *threads):
        self.hold.release.set()
        for t, _ in threads:
            t.join()

    def arrivals(self, model):
        return self.hooks.call("GET", "arrivals").get(model, [])

    def log_lines(self, model, path):
        """The access log's lines of model's requests to /path/."""
        log = os.path.join(self.ngx.dir, "prio.log")
        if not os.path.exists(log):
            return []
        with open(log) as f:
            return [l.split() for l in f if l.split()[0] == model
                    and l.split()[5].startswith("/%s/" % path)]

    # 1. priority order

    def test_priority_order(self):
        """levels=3: 1 first, then 2, then 3 with 0, an absent priority
        and one above the levels; arrival order within a level."""
        holder = self.held("order_hold", "om")
        sent = [("l1", {"priority": 3}), ("l2", None), ("h1", {"priority": 1}),
                ("m1", {"priority": 2}), ("l3", {"priority": 0}),
                ("h2", {"priority": 1}), ("l4", {"priority": 9})]
        waiters = []
        for n, (rid, params) in enumerate(sent, 1):
            waiters.append(self.background("order", "om", params, rid))
            self.queued("om", n)
        self.release(holder, *waiters)
        for _, box in waiters:
            self.assertEqual(box[0][0], 200, box[0][2])
        got = [a["id"] for a in self.arrivals("om")]
        self.assertEqual(got, ["h1", "h2", "m1", "l1", "l2", "l3", "l4"])
        lines = wait_for(lambda: self.log_lines("om", "order"),
                         lambda v: len(v) >= 7)
        prios = sorted(l[3] for l in lines)
        self.assertEqual(prios, ['"1"', '"1"', '"2"'] + ['"3"'] * 4)

    # 2. oip_priority, levels, what goes upstream

    def test_override_both_ways(self):
        cases = [
            # (API key, the client's, upstream, $oip_priority)
            ("gold", 3, 1, "1"),
            ("bronze", 1, 3, "3"),
            (None, 1, 1, "1"),
            (None, 3, 3, "3"),
            (None, 7, 2, "2"),        # above levels=3: the default level
            (None, 0, 2, "2"),
            (None, None, None, "2"),  # none: none upstream
            ("gold", None, 1, "1"),   # added
        ]
        for n, (key, sent, up, var) in enumerate(cases):
            with self.subTest(key=key, sent=sent):
                params = {} if sent is None else {"priority": sent}
                params["k"] = n
                headers = {"X-Api-Key": key} if key else None
                st, _, out = self.post("tier", "tm", params, "t%d" % n,
                                       headers)
                self.assertEqual(st, 200, out)
                got = self.arrivals("tm")[-1]
                self.assertEqual(got["id"], "t%d" % n)
                self.assertEqual(got["parameters"].get("priority"), up)
                self.assertEqual(got["parameters"]["k"], n)
        lines = wait_for(lambda: self.log_lines("tm", "tier"),
                         lambda v: len(v) >= len(cases))
        self.assertEqual(sorted(l[3] for l in lines),
                         sorted('"%s"' % c[3] for c in cases))

    def test_no_levels_no_override(self):
        """Without oip_admit and oip_priority the client's goes as is."""
        for sent in (0, 7, 123456789):
            st, _, out = self.post("plain", "pm", {"priority": sent})
            self.assertEqual(st, 200, out)
            self.assertEqual(self.arrivals("pm")[-1]["parameters"],
                             {"priority": sent})

    def test_bad_oip_priority(self):
        for value in ("abc", "-1", "1.5", "9223372036854775808"):
            with self.subTest(value=value):
                resp = self.post("bad", "pm", {"priority": 1},
                                 headers={"X-Prio": value})
                self.assertJSONError(resp, 500, "oip_priority")
                self.assertEqual(self.arrivals("pm"), [])
        with open(os.path.join(self.ngx.dir, "error.log")) as f:
            text = f.read()
        self.assertIn('[error]', text)
        self.assertIn('oip_priority "abc" is not a priority', text)
        # an empty value: the client's own
        st, _, out = self.post("bad", "pm", {"priority": 4},
                               headers={"X-Prio": ""})
        self.assertEqual(st, 200, out)
        st, _, out = self.post("bad", "pm", {"priority": 4},
                               headers={"X-Prio": "6"})
        self.assertEqual(st, 200, out)
        self.assertEqual([a["parameters"]["priority"]
                          for a in self.arrivals("pm")], [4, 6])

    def test_grpc_int64_param(self):
        req = json.dumps({"parameters": {"priority": 2, "timeout": 60000000},
                          "inputs": [{"name": n, "datatype": "INT32",
                                      "shape": [1, 16], "data": [1] * 16}
                                     for n in ("INPUT0", "INPUT1")]})
        for key, want in (("gold", 1), (None, 2), ("bronze", 2)):
            with self.subTest(key=key):
                st, _, out = self.ngx.post(
                    "/grpc/v2/models/simple/infer", req,
                    {"X-Api-Key": key} if key else None)
                self.assertEqual(st, 200, out)
                params = self.grpc.received()[-1]["parameters"]
                self.assertEqual(params["priority"],
                                 {"kind": "int64_param", "value": want})
                self.assertEqual(params["timeout"]["kind"], "int64_param")
                left = params["timeout"]["value"]
                self.assertLess(left, 60000000)
                self.assertGreater(left, 60000000 - 30000000 * SLOW / 20)

    # 3. shedding

    def test_shed_lowest_for_higher(self):
        """queue=2 of levels=2: two of level 2 wait; one of level 1
        arrives: the latest of level 2 is shed, a 429 saying why."""
        holder = self.held("shed_hold", "sm")
        low1 = self.background("shed", "sm", None, "low1")
        self.queued("sm", 1)
        low2 = self.background("shed", "sm", {"priority": 2}, "low2")
        self.queued("sm", 2)
        high = self.background("shed", "sm", {"priority": 1}, "high")
        low2[0].join(30 * SLOW)
        self.assertFalse(low2[0].is_alive())
        resp = low2[1][0]
        msg = self.assertJSONError(resp, 429)
        self.assertRegex(msg, r"^model 'sm' is over its admission budget "
                         r"\(concurrency=1\) and its queue is full: a "
                         r"request of a higher priority took the place of "
                         r"this one \(priority 2\) after \d+ ms$")
        self.assertRegex(resp[1].get("retry-after", ""), r"^[1-9]\d*$")
        # a third of the lowest level finds the queue full of higher
        resp = self.post("shed", "sm", {"priority": 2}, "low3")
        self.assertJSONError(resp, 429, "the queue is full (2 waiting)")
        self.release(holder, low1, high)
        self.assertEqual(low1[1][0][0], 200)
        self.assertEqual(high[1][0][0], 200)
        self.assertEqual([a["id"] for a in self.arrivals("sm")],
                         ["high", "low1"])
        lines = wait_for(lambda: [l for l in self.log_lines("sm", "shed")
                                  if l[1] == "429"],
                         lambda v: len(v) >= 2)
        self.assertEqual([l[2] for l in lines], ["shed", "shed"])

    # 4. deadlines

    def test_deadline_expires_while_waiting(self):
        holder = self.held("dl_hold", "dm")
        resp = self.post("dl", "dm", {"timeout": 300000}, "late")
        msg = self.assertJSONError(resp, 504)
        self.assertRegex(msg, r"^model 'dm': the request's deadline "
                         r"\(timeout 300000 us\) passed (after \d+ ms in "
                         r"the admission queue: not forwarded|before it "
                         r"could be forwarded)$")
        # the earlier of the two decides: wait=300ms before 10 s
        resp = self.post("dlw", "dm", {"timeout": 10000000}, "waited")
        self.assertJSONError(resp, 429, "waited")
        self.release(holder)
        self.assertEqual(self.arrivals("dm"), [])
        lines = wait_for(lambda: [l for l in self.log_lines("dm", "dl")
                                  + self.log_lines("dm", "dlw")
                                  if l[1] != "200"],
                         lambda v: len(v) >= 2)
        self.assertEqual(sorted(l[2] for l in lines), ["expired", "timeout"])
        self.assertIn('"300000"', [l[4] for l in lines])
        st, _, text = self.ngx.request("GET", "/metrics")
        self.assertIn('oip_admission_total{model="dm",result="expired"} 1',
                      text.decode())
        self.assertIn('oip_admission_total{model="dm",result="timeout"} 1',
                      text.decode())

    def test_remaining_timeout_forwarded(self):
        """What is left of the client's timeout goes upstream, in place
        (JSON: spaces after the digits; the binary form's IHCL as it
        was), queued or not, with or without a budget."""
        st, _, out = self.post("plain", "pm", {"timeout": 60000000, "a": 1})
        self.assertEqual(st, 200, out)
        params = self.arrivals("pm")[-1]["parameters"]
        self.assertEqual(params["a"], 1)
        self.assertLess(params["timeout"], 60000000)
        self.assertGreater(params["timeout"], 60000000 - 1500000 * SLOW)
        header = {"parameters": {"timeout": 90000000},
                  "inputs": [{"name": "INPUT0", "datatype": "FP32",
                              "shape": [1],
                              "parameters": {"binary_data_size": 4}}]}
        body, ihcl = binary_body(header, [b"\x00\x00\xc0\x3f"])
        st, _, out = self.ngx.post("/plain/v2/models/pm/infer", body,
                                   {IHCL: str(ihcl)})
        self.assertEqual(st, 200, out)
        self.assertLess(self.arrivals("pm")[-1]["parameters"]["timeout"],
                        90000000)
        # queued first
        holder = self.held("dl_hold", "dm")
        waiter = self.background("dl", "dm", {"timeout": 60000000}, "q")
        self.queued("dm", 1)
        self.release(holder, waiter)
        self.assertEqual(waiter[1][0][0], 200)
        left = self.arrivals("dm")[-1]["parameters"]["timeout"]
        self.assertLess(left, 60000000)
        self.assertGreater(left, 60000000 - 30000000 * SLOW / 20)

    def test_under_a_millisecond_left(self):
        for path in ("plain", "dl"):
            with self.subTest(path=path):
                resp = self.post(path, "pm", {"timeout": 1})
                self.assertJSONError(resp, 504, "deadline (timeout 1 us)")
        self.assertEqual(self.arrivals("pm"), [])
        # 0: no deadline
        st, _, out = self.post("plain", "pm", {"timeout": 0})
        self.assertEqual(st, 200, out)
        self.assertEqual(self.arrivals("pm")[-1]["parameters"],
                         {"timeout": 0})


if __name__ == "__main__":
    run_tests()
