#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""Streaming answers (issue 30): POST .../infer_stream in front of the
example gRPC runtime (oip_upstream_protocol grpc), which serves Triton's
ModelStreamInfer with decoupled models (/_test/decoupled: N answers a
request, spaced, an error in the stream, a status in the trailers, an
empty final answer), and counts the calls cancelled under it.

1. Events: one "data: <answer as JSON>\\n\\n" a response, in order, each
   as it comes (a Python reader sees the first before the runtime sent
   the last), text/event-stream without Content-Length; HTTP/1.1 (curl
   -N) and HTTP/2 clients; every REST input form; binary outputs asked
   for come as JSON; a model that is not decoupled gives one event.
2. Errors: before the first event a JSON error answer with its status
   (unknown model, a bad input, a trailers-only status); after it one
   last event data: {"error": ...} (the runtime's error_message, or a
   status in the trailers), and nothing more; an empty final answer is
   no event; /infer on a decoupled model is Triton's 501.
3. Cancellation: a client that closes its connection, or resets its
   HTTP/2 stream, mid-stream or while a unary call runs: the runtime
   sees its call cancelled; $oip_admission and the metrics say
   "cancelled".
4. oip_stream_idle, $oip_stream_events, $oip_first_event_time and the
   streams' metrics.
5. An HTTP runtime's own infer_stream (MLServer's): validated and
   converted as /infer is, its events passed as they come although
   proxy_buffering is on, a cut or a silence told with an error event.
"""

import http.client
import json
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import (MODULE, GatewayTestCase, heavy, run_tests, wait_for)
from test_admission import h2_frame, h2_literal
from test_examples import nginx_t
from test_signatures import Hooks

URI = "/v2/models/identity/infer_stream"


def body(data=(1.5, 2.0), **params):
    doc = {"inputs": [{"name": "INPUT0", "datatype": "FP32",
                       "shape": [len(data)], "data": list(data)}]}
    if params:
        doc["parameters"] = params
    return json.dumps(doc)


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def read_events(resp):
    """A server-sent events reader: [(seconds since start, data)] as
    they arrive, each its own "data:" line and a blank line."""
    out, start, data = [], time.time(), None
    while True:
        line = resp.readline()
        if not line:
            return out
        line = line.rstrip(b"\n")
        if line.startswith(b"data: "):
            assert data is None, line
            data = line[6:]
        elif line == b"" and data is not None:
            out.append((time.time() - start, json.loads(data)))
            data = None
        else:
            raise AssertionError("not an event line: %r" % line)


class Streams(GatewayTestCase):

    @classmethod
    def setUpGateway(cls):
        cls.rt = cls.start_grpc_runtime()
        cls.ngx = cls.start_nginx("""
            oip_upstream_protocol grpc;
            access_log {dir}/stream.log stream;

            location /v2/ {{
                oip on;
                grpc_pass grpc://127.0.0.1:{rt};
            }}
            location /raw/ {{
                oip on;
                oip_raw_input INPUT0 FP32 -1;
                rewrite ^/raw(/.*)$ $1 break;
                grpc_pass grpc://127.0.0.1:{rt};
            }}
            location /idle/ {{
                oip on;
                oip_stream_idle 400ms;
                grpc_read_timeout 5s;
                rewrite ^/idle(/.*)$ $1 break;
                grpc_pass grpc://127.0.0.1:{rt};
            }}
            location /adm/ {{
                oip on;
                oip_admit zone=adm concurrency=4 queue=4 wait=5s;
                rewrite ^/adm(/.*)$ $1 break;
                grpc_pass grpc://127.0.0.1:{rt};
            }}
            location = /metrics {{
                oip_metrics;
            }}
        """, http="""
            oip_metrics_zone zone=metrics:1m;
            oip_admission_zone zone=adm:1m;
            log_format stream '$oip_model $status $oip_admission '
                              '$oip_stream_events $oip_first_event_time '
                              '$request_time $request_uri';
        """, rt=cls.rt.port)

    def setUp(self):
        self.rt.hook("POST", "/_test/reset")

    def decoupled(self, **plan):
        self.rt.hook("PUT", "/_test/decoupled/identity", plan)

    def stream(self, data=None, path=URI, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.ngx.port,
                                          timeout=30)
        self.addCleanup(conn.close)
        conn.request("POST", path, body=body() if data is None else data,
                     headers=headers or {})
        return conn.getresponse()

    def events(self, **kw):
        resp = self.stream(**kw)
        if resp.status != 200:
            self.fail("%d %r" % (resp.status, resp.read()))
        return resp, [e for _, e in read_events(resp)]

    def values(self, event, name):
        return [o["data"] for o in event["outputs"] if o["name"] == name][0]

    # 1. events

    def test_events_in_order(self):
        self.decoupled(responses=5)
        resp, evs = self.events()
        self.assertEqual(resp.getheader("Content-Type"),
                         "text/event-stream; charset=utf-8")
        self.assertIsNone(resp.getheader("Content-Length"))
        self.assertEqual(resp.getheader("Transfer-Encoding"), "chunked")
        self.assertEqual([self.values(e, "INDEX") for e in evs],
                         [[k] for k in range(5)])
        for e in evs:
            self.assertEqual(self.values(e, "OUTPUT0"), [1.5, 2.0])
            self.assertEqual(e["model_name"], "identity")
        self.assertEqual([e["parameters"]["triton_final_response"]
                          for e in evs], [False] * 4 + [True])

    @heavy
    def test_each_event_as_it_comes(self):
        """Spaced 0.3 s: the first is read long before the last is sent
        (the gateway holds nothing back)."""
        self.decoupled(responses=4, spacing=0.3)
        resp = self.stream()
        self.assertEqual(resp.status, 200)
        evs = read_events(resp)
        self.assertEqual(len(evs), 4)
        self.assertLess(evs[0][0] + 0.5, evs[-1][0])
        self.assertEqual([t for t, _ in evs], sorted(t for t, _ in evs))

    def test_curl_http1_and_http2(self):
        self.decoupled(responses=3)
        for h2 in (False, True):
            st, out = self.ngx.curl("-N", "-d", body(), "{base}" + URI,
                                    h2=h2)
            self.assertEqual(st, 200, out)
            chunks = out.split(b"\n\n")
            self.assertEqual(chunks[-1], b"")
            evs = [json.loads(c[len(b"data: "):]) for c in chunks[:-1]]
            self.assertTrue(all(c.startswith(b"data: {")
                                for c in chunks[:-1]), out)
            self.assertEqual([self.values(e, "INDEX") for e in evs],
                             [[0], [1], [2]])

    def test_every_input_form(self):
        self.decoupled(responses=2)
        header = json.dumps({"inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [2],
             "parameters": {"binary_data_size": 8}}]}).encode()
        data = struct.pack("<2f", 1.5, 2.0)
        forms = [
            ({}, body().encode(), URI),
            ({"Inference-Header-Content-Length": str(len(header))},
             header + data, URI),
            ({"Inference-Header-Content-Length": "0",
              "Content-Type": "application/octet-stream"}, data,
             "/raw" + URI),
            # binary outputs asked for: JSON all the same
            ({}, body(binary_data_output=True).encode(), URI),
        ]
        for headers, data_, path in forms:
            with self.subTest(path=path, headers=headers):
                _, evs = self.events(data=data_, path=path, headers=headers)
                self.assertEqual(len(evs), 2)
                for e in evs:
                    self.assertEqual(self.values(e, "OUTPUT0"), [1.5, 2.0])

    def test_not_decoupled_one_event(self):
        _, evs = self.events()
        self.assertEqual(len(evs), 1)
        self.assertEqual(self.values(evs[0], "OUTPUT0"), [1.5, 2.0])
        self.assertTrue(evs[0]["parameters"]["triton_final_response"])

    def test_variables_and_metrics(self):
        """$oip_stream_events, $oip_first_event_time (the first came
        after 0.2 s, the last 0.2 s later), and the metrics."""
        self.decoupled(responses=3, spacing=[0.2, 0, 0.3])
        _, evs = self.events(path="/idle" + URI)
        self.assertEqual([self.values(e, "INDEX") for e in evs],
                         [[0], [1], [2]])
        line = wait_for(lambda: [l for l in read(os.path.join(
            self.ngx.dir, "stream.log")).splitlines()
            if l.startswith("identity 200 - 3 ") and "/idle/" in l], bool)
        self.assertEqual(len(line), 1, line)
        _, _, _, events, first, total, _ = line[0].split()
        self.assertEqual(events, "3")
        self.assertGreaterEqual(float(first), 0.19)
        self.assertGreaterEqual(float(total) - float(first), 0.29)
        m = wait_for(lambda: self.ngx.request("GET", "/metrics")[2].decode(),
                     lambda t: "oip_stream_events_total" in t)
        self.assertRegex(m, r'oip_stream_events_total\{model="identity"\} '
                         r'[1-9]\d*\n')
        self.assertRegex(m, r'oip_time_to_first_event_seconds_count'
                         r'\{model="identity"\} [1-9]\d*\n')
        self.assertIn('oip_time_to_first_event_seconds_bucket{model='
                      '"identity",le="0.5"}', m)

    @heavy
    def test_idle_limit(self):
        """oip_stream_idle 400ms: a silence after an event ends the stream
        with an error event; before any, a JSON 504; events closer than
        that pass."""
        self.decoupled(responses=3, spacing=[0, 1])
        _, evs = self.events(path="/idle" + URI)
        self.assertEqual(len(evs), 2, evs)
        self.assertEqual(evs[1], {"error": "upstream answer: the runtime "
                                  "sent nothing for oip_stream_idle"})
        self.cancelled()
        self.decoupled(responses=3, spacing=1)
        resp = self.stream(path="/idle" + URI)
        out = resp.read()
        self.assertEqual(resp.status, 504, out)
        self.assertEqual(json.loads(out), {"error": "upstream answer: the "
                                           "runtime sent nothing for "
                                           "oip_stream_idle"})
        # each silence shorter, the whole longer: the limit is a silence's
        self.decoupled(responses=4, spacing=0.15)
        _, evs = self.events(path="/idle" + URI)
        self.assertEqual([self.values(e, "INDEX") for e in evs],
                         [[0], [1], [2], [3]])

    def test_idle_below_the_read_timeout(self):
        for loc, msg in [
                ("oip_stream_idle 5s; grpc_read_timeout 5s; grpc_pass "
                 "grpc://127.0.0.1:1;", "oip_stream_idle 5000ms is not below "
                 "grpc_pass's read timeout, 5000ms"),
                ("oip_stream_idle 90s; proxy_pass http://127.0.0.1:1;",
                 "oip_stream_idle 90000ms is not below proxy_pass's read "
                 "timeout, 60000ms")]:
            grpc = "grpc_pass" in loc
            conf = ("load_module %s;\nevents {}\nhttp { server { listen "
                    "127.0.0.1:1; location / { oip on; %s %s } } }\n"
                    % (MODULE, "oip_upstream_protocol grpc;" if grpc else "",
                       loc))
            with self.subTest(loc=loc):
                rc, err = nginx_t(conf)
                self.assertNotEqual(rc, 0)
                self.assertIn(msg, err)
                rc, err = nginx_t(conf.replace("oip_stream_idle 5s",
                                               "oip_stream_idle 4s")
                                  .replace("oip_stream_idle 90s",
                                           "oip_stream_idle 59s"))
                self.assertEqual(rc, 0, err)

    # 2. errors

    def test_errors_before_the_first_event(self):
        cases = [
            ("/v2/models/nosuch/infer_stream", body(), 404,
             "Request for unknown model: 'nosuch' is not found"),
            ("/v2/models/simple/infer_stream", body(), 400,
             "model 'simple' expects 'INT32'"),
            (URI, "{", 400, None),
        ]
        for path, data, status, words in cases:
            with self.subTest(path=path):
                resp = self.stream(data=data, path=path)
                out = resp.read()
                self.assertEqual(resp.status, status, out)
                self.assertEqual(resp.getheader("Content-Type"),
                                 "application/json")
                err = json.loads(out)["error"]
                if words:
                    self.assertIn(words, err)
        # a status alone, before any answer (trailers-only)
        self.decoupled(status_after=0, code="UNAVAILABLE",
                       message="the model is unloading")
        resp = self.stream()
        out = resp.read()
        self.assertEqual(resp.status, 503, out)
        self.assertEqual(json.loads(out),
                         {"error": "the model is unloading"})

    def test_error_in_the_stream_ends_it(self):
        self.decoupled(responses=4, error_after=2, error="out of memory")
        _, evs = self.events()
        self.assertEqual([self.values(e, "INDEX") for e in evs[:2]],
                         [[0], [1]])
        self.assertEqual(evs[2:], [{"error": "out of memory"}])

    def test_status_in_the_trailers(self):
        self.decoupled(responses=4, status_after=1, code="INTERNAL",
                       message="backend crashed")
        _, evs = self.events()
        self.assertEqual(len(evs), 2)
        self.assertEqual(self.values(evs[0], "INDEX"), [0])
        self.assertEqual(evs[1], {"error": "backend crashed"})

    def test_runtime_gone_mid_stream(self):
        """The runtime's connection cut after two answers: one last error
        event, not a silent cut; before any, a JSON 502."""
        self.decoupled(responses=4, reset_after=2)
        _, evs = self.events()
        self.assertEqual(len(evs), 3, evs)
        self.assertEqual(evs[2], {"error": "upstream answer: cut short, "
                                  "the upstream failed or timed out"})
        self.decoupled(responses=4, reset_after=0)
        resp = self.stream()
        out = resp.read()
        self.assertEqual(resp.status, 502, out)
        self.assertIn("error", json.loads(out))

    def test_empty_final_response_no_event(self):
        self.decoupled(responses=2, empty_final=True)
        _, evs = self.events()
        self.assertEqual([self.values(e, "INDEX") for e in evs],
                         [[0], [1]])

    def test_zero_responses(self):
        self.decoupled(responses=0)
        resp, evs = self.events()
        self.assertEqual(evs, [])
        self.assertEqual(resp.getheader("Content-Type"),
                         "text/event-stream; charset=utf-8")

    def test_unary_infer_on_a_decoupled_model(self):
        self.decoupled(responses=2)
        st, _, out = self.ngx.post("/v2/models/identity/infer", body())
        self.assertEqual(st, 501, out)
        self.assertEqual(json.loads(out)["error"],
                         "ModelInfer RPC doesn't support models with "
                         "decoupled transaction policy")

    # 3. cancellation

    def cancelled(self, before=0):
        self.assertEqual(wait_for(
            lambda: self.rt.hook("GET", "/_test/cancelled")["calls"],
            lambda n: n > before), before + 1)

    def raw_request(self, path, data):
        s = socket.create_connection(("127.0.0.1", self.ngx.port))
        self.addCleanup(s.close)
        s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                   "\r\n" % (path, len(data))).encode() + data.encode())
        return s

    def test_client_closes_mid_stream(self):
        self.decoupled(responses=200, spacing=0.05)
        s = self.raw_request("/adm" + URI, body())
        got = b""
        while got.count(b"data: ") < 2:
            got += s.recv(65536)
        s.close()
        self.cancelled()
        log = wait_for(lambda: read(os.path.join(self.ngx.dir,
                                                 "stream.log")),
                       lambda t: "cancelled" in t)
        # the 200 that began it, its client gone
        self.assertRegex(log, r"identity 200 cancelled \d+ ")
        want = ('oip_admission_total{model="identity",result="cancelled"} '
                '1')
        self.assertIn(want, wait_for(
            lambda: self.ngx.request("GET", "/metrics")[2].decode(),
            lambda t: want in t))

    def test_http2_stream_reset(self):
        """RST_STREAM on a connection that stays open: the reset alone
        cancels the runtime's call."""
        self.decoupled(responses=200, spacing=0.05)
        data = body().encode()
        c = socket.create_connection(("127.0.0.1", self.ngx.h2port))
        self.addCleanup(c.close)
        c.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0)
                  + h2_frame(1, 4, 1, b"".join(
                      h2_literal(k, v) for k, v in (
                          (":method", "POST"), (":scheme", "http"),
                          (":authority", "localhost"), (":path", URI),
                          ("content-length", str(len(data))))))
                  + h2_frame(0, 1, 1, data))
        got = b""
        while got.count(b"data: ") < 2:
            got += c.recv(65536)
        c.sendall(h2_frame(3, 0, 1, struct.pack(">I", 8)))
        self.cancelled()

    def test_client_closes_during_a_unary_call(self):
        self.rt.hook("PUT", "/_test/fault", {"mode": "slow", "seconds": 5})
        s = self.raw_request("/v2/models/identity/infer", body())
        wait_for(lambda: self.rt.received(),
                 lambda calls: any(c["method"] == "ModelInfer"
                                   for c in calls))
        s.close()
        self.cancelled()


class NoStreams(GatewayTestCase):
    """Upstreams that cannot stream: a JSON error, never a hang."""

    @classmethod
    def setUpGateway(cls):
        cls.grpc = cls.start_grpc_runtime(["--no-stream"])
        cls.http = cls.start_runtime("triton")
        cls.ngx = cls.start_nginx("""
            location /grpc/ {{
                oip on;
                oip_upstream_protocol grpc;
                rewrite ^/grpc(/.*)$ $1 break;
                grpc_pass grpc://127.0.0.1:{g};
            }}
            location /v2/ {{
                oip on;
                proxy_pass http://127.0.0.1:{h};
            }}
        """, g=cls.grpc.port, h=cls.http.port)

    def test_grpc_without_model_stream_infer(self):
        """KServe's, OpenVINO's, TorchServe's servers: UNIMPLEMENTED."""
        st, _, out = self.ngx.post("/grpc" + URI, body())
        self.assertEqual(st, 501, out)
        self.assertIn("error", json.loads(out))

    def test_http_runtime_without_the_endpoint(self):
        """Triton's HTTP front has no infer_stream: its 404, as JSON."""
        st, _, out = self.ngx.post(URI, body())
        self.assertEqual(st, 404, out)
        self.assertIn("error", json.loads(out))


class NativeStreams(GatewayTestCase):
    """An HTTP runtime's own infer_stream (the example runtime's MLServer
    family): validated and converted as /infer is, its events passed as
    they come although proxy_buffering is on, counted, a cut told."""

    @classmethod
    def setUpGateway(cls):
        cls.rt = cls.start_runtime("mlserver")
        cls.hooks = Hooks(cls.rt.port)
        cls.ngx = cls.start_nginx("""
            access_log {dir}/native.log native;

            location /v2/ {{
                oip on;
                oip_upstream_inputs json;
                oip_stream_idle 400ms;
                proxy_buffering on;
                proxy_pass http://127.0.0.1:{rt};
            }}
        """, http="""
            log_format native '$oip_model $status $oip_stream_events '
                              '$oip_first_event_time';
        """, rt=cls.rt.port)

    def setUp(self):
        self.hooks.call("POST", "reset")

    def streaming(self, **plan):
        self.hooks.call("PUT", "streaming/identity", plan)

    def stream(self, data=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.ngx.port,
                                          timeout=30)
        self.addCleanup(conn.close)
        conn.request("POST", URI, body=body() if data is None else data,
                     headers=headers or {})
        return conn.getresponse()

    def values(self, event, name):
        return [o["data"] for o in event["outputs"] if o["name"] == name][0]

    def test_events(self):
        self.streaming(responses=3)
        resp = self.stream()
        self.assertEqual(resp.status, 200)
        self.assertEqual(resp.getheader("Content-Type"),
                         "text/event-stream; charset=utf-8")
        evs = [e for _, e in read_events(resp)]
        self.assertEqual([self.values(e, "INDEX") for e in evs],
                         [[0], [1], [2]])
        self.assertEqual(self.values(evs[0], "OUTPUT0"), [1.5, 2.0])
        log = wait_for(lambda: read(os.path.join(self.ngx.dir,
                                                 "native.log")),
                       lambda t: "identity 200 3 " in t)
        self.assertIn("identity 200 3 ", log)

    @heavy
    def test_each_event_as_it_comes(self):
        """proxy_buffering on: nginx would hold the events for its
        buffers; the first is read long before the last is sent."""
        self.streaming(responses=4, spacing=0.3)
        resp = self.stream()
        evs = read_events(resp)
        self.assertEqual(len(evs), 4)
        self.assertLess(evs[0][0] + 0.5, evs[-1][0])

    def test_converted_and_validated(self):
        """A binary request becomes JSON for MLServer; a bad one is
        refused at the edge, never reaching the runtime."""
        self.streaming(responses=2)
        header = json.dumps({"inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [2],
             "parameters": {"binary_data_size": 8}}]}).encode()
        resp = self.stream(header + struct.pack("<2f", 1.5, 2.0),
                           {"Inference-Header-Content-Length":
                            str(len(header))})
        evs = [e for _, e in read_events(resp)]
        self.assertEqual([self.values(e, "OUTPUT0") for e in evs],
                         [[1.5, 2.0]] * 2)
        before = self.hooks.infer("identity")
        resp = self.stream(json.dumps({"inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [3],
             "data": [1, 2]}]}))
        out = resp.read()
        self.assertEqual(resp.status, 400, out)
        self.assertIn("error", json.loads(out))
        self.assertEqual(self.hooks.infer("identity"), before)

    def test_not_streaming_one_event(self):
        resp = self.stream()
        evs = [e for _, e in read_events(resp)]
        self.assertEqual(len(evs), 1)
        self.assertEqual(self.values(evs[0], "OUTPUT0"), [1.5, 2.0])

    def test_errors(self):
        # before the first event: MLServer's plain-text 500, as JSON
        conn = http.client.HTTPConnection("127.0.0.1", self.ngx.port,
                                          timeout=30)
        self.addCleanup(conn.close)
        conn.request("POST", "/v2/models/nosuch/infer_stream", body=body())
        r = conn.getresponse()
        out = r.read()
        self.assertEqual(r.status, 500, out)
        self.assertEqual(json.loads(out), {"error": "Internal Server Error"})
        # mid-stream: uvicorn closes the connection; the client is told
        self.streaming(responses=4, fail_after=2)
        evs = [e for _, e in read_events(self.stream())]
        self.assertEqual(len(evs), 3, evs)
        self.assertEqual(evs[2], {"error": "upstream answer: cut short, "
                                  "the upstream failed or timed out"})

    @heavy
    def test_idle(self):
        self.streaming(responses=3, spacing=1)
        resp = self.stream()
        out = resp.read()
        # its headers came at once, then nothing: an error event
        self.assertEqual(resp.status, 200, out)
        self.assertEqual(out, b'data: {"error":"upstream answer: the '
                         b'runtime sent nothing for oip_stream_idle"}\n\n')

    def test_client_leaves(self):
        self.streaming(responses=100, spacing=0.05)
        s = socket.create_connection(("127.0.0.1", self.ngx.port))
        self.addCleanup(s.close)
        data = body().encode()
        s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d"
                  b"\r\n\r\n%s" % (URI.encode(), len(data), data))
        got = b""
        while got.count(b"data: ") < 2:
            got += s.recv(65536)
        s.close()
        self.assertEqual(wait_for(
            lambda: self.hooks.counts()["gone"].get("identity", 0), bool), 1)


if __name__ == "__main__":
    run_tests()
