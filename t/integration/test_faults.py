#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""Upstream faults: an upstream that cuts its answer short, resets, lies
about sizes, answers garbage, stalls or never answers.  The client gets a
JSON 502 or 504 within the configured timeouts, the worker lives on, and
the error log holds no [alert] or [crit]."""

import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import SLOW, GatewayTestCase, IHCL, run_tests
from tensors import dumps

TIMEOUT = 1.0   # proxy_read_timeout in the test configuration

GOOD_HEADER = dumps({"model_name": "m", "outputs": [
    {"name": "y", "datatype": "INT16", "shape": [2],
     "parameters": {"binary_data_size": 4}}]})


def http(status, headers, body):
    head = "HTTP/1.1 %s\r\n" % status
    for k, v in headers.items():
        head += "%s: %s\r\n" % (k, v)
    return head.encode() + b"\r\n" + body


def answers():
    """mode -> what the upstream does after reading a request"""
    n = len(GOOD_HEADER)
    full = GOOD_HEADER + b"\1\0\2\0"
    return {
        # cut short: Content-Length promises more, then the socket closes
        "truncate": ("send", http("200 OK", {
            "Content-Length": len(full) + 50, IHCL: n}, full)),
        # reset mid-body
        "reset": ("reset", http("200 OK", {
            "Content-Length": len(full) + 50, IHCL: n}, full[:20])),
        # headers, some body, then nothing
        "stall": ("stall", http("200 OK", {
            "Content-Length": len(full) + 50, IHCL: n}, full[:20])),
        # nothing at all, for ever
        "silent": ("silent", b""),
        # half a status line, then nothing
        "slow-headers": ("stall", b"HTTP/1.1 200"),
        # an answer that lies
        "ihcl-past-end": ("send", http("200 OK", {
            "Content-Length": len(full), IHCL: n + 100}, full)),
        "sizes-short": ("send", http("200 OK", {
            "Content-Length": len(full) - 2, IHCL: n}, full[:-2])),
        "sizes-long": ("send", http("200 OK", {
            "Content-Length": len(full) + 3, IHCL: n}, full + b"abc")),
        "bad-json": ("send", http("200 OK", {
            "Content-Length": 12}, b'{"outputs":[')),
        "garbage": ("send", b"\x00\xff garbage, not HTTP\r\n\r\n"),
        "bool-2": ("send", http("200 OK", {
            "Content-Length": len(dumps({"outputs": [
                {"name": "b", "datatype": "BOOL", "shape": [1],
                 "parameters": {"binary_data_size": 1}}]})) + 1,
            IHCL: len(dumps({"outputs": [
                {"name": "b", "datatype": "BOOL", "shape": [1],
                 "parameters": {"binary_data_size": 1}}]}))},
            dumps({"outputs": [{"name": "b", "datatype": "BOOL",
                                "shape": [1], "parameters":
                                {"binary_data_size": 1}}]}) + b"\2")),
    }


class BadUpstream:
    """A TCP server that reads one request per connection and misbehaves
    as its mode says."""

    def __init__(self, mode, action, data):
        self.mode, self.action, self.data = mode, action, data
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        self.stop_ev = threading.Event()
        threading.Thread(target=self.serve, daemon=True).start()

    def read_request(self, c):
        data = b""
        c.settimeout(5)
        while b"\r\n\r\n" not in data:
            chunk = c.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        while len(rest) < length:
            chunk = c.recv(65536)
            if not chunk:
                return
            rest += chunk

    def serve(self):
        while not self.stop_ev.is_set():
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.handle, args=(c,),
                             daemon=True).start()

    def handle(self, c):
        self.hits += 1
        try:
            self.read_request(c)
            if self.data:
                c.sendall(self.data)
            if self.action == "reset":
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                             b"\1\0\0\0\0\0\0\0")
            elif self.action in ("stall", "silent"):
                self.stop_ev.wait(30)
        except OSError:
            pass
        finally:
            c.close()

    def stop(self):
        self.stop_ev.set()
        self.sock.close()


REQ = dumps({"inputs": [{"name": "x", "shape": [2], "datatype": "INT16",
                         "data": [1, 2]}]})


class Faults(GatewayTestCase):

    @classmethod
    def setUpGateway(cls):
        cls.bad = {}
        conf = ""
        for mode, (action, data) in answers().items():
            up = BadUpstream(mode, action, data)
            cls._stoppers.append(up.stop)
            cls.bad[mode] = up
            for buffering in ("on", "off"):
                conf += """
            location /%s-%s/ {{
                oip on;
                oip_upstream_inputs binary;
                oip_upstream_outputs binary;
                proxy_buffering %s;
                proxy_connect_timeout %ds;
                proxy_read_timeout %ds;
                proxy_pass http://127.0.0.1:%d/;
            }}
                """ % (mode, buffering, buffering, TIMEOUT, TIMEOUT,
                       up.port)
        conf += """
            location /refused/ {{
                oip on;
                proxy_pass http://127.0.0.1:1/;
            }}
        """
        cls.ngx = cls.start_nginx(conf)

    def setUp(self):
        self.workers = self.ngx.workers()

    def tearDown(self):
        self.assertEqual(self.ngx.workers(), self.workers)

    def fault(self, path, status, msg):
        t0 = time.time()
        resp = self.ngx.post(path + "v2/models/m/infer", REQ, timeout=30)
        took = time.time() - t0
        err = self.assertJSONError(resp, status, msg)
        self.assertLess(took, (TIMEOUT + 3) * SLOW,
                        "%s took %.1fs" % (path, took))
        return err

    def test_faults(self):
        expect = {
            "truncate": (502, "cut short"),
            "reset": (502, "cut short"),
            "stall": (502, "cut short"),
            "silent": (504, "did not answer in time"),
            "slow-headers": (504, "did not answer in time"),
            "ihcl-past-end": (502, "exceeds the body length"),
            "sizes-short": (502, "runs past the end"),
            "sizes-long": (502, "not claimed"),
            "bad-json": (502, "invalid JSON"),
            "garbage": (502, "not HTTP"),
            "bool-2": (502, "BOOL element 0 is 2"),
        }
        for mode, (status, msg) in expect.items():
            for buffering in ("on", "off"):
                with self.subTest(mode=mode, buffering=buffering):
                    self.fault("/%s-%s/" % (mode, buffering), status, msg)

    def test_refused(self):
        self.fault("/refused/", 502, "could not be reached or failed")

    def test_faults_are_logged_not_alerted(self):
        self.fault("/bad-json-on/", 502, "invalid JSON")
        log = self.ngx.log()
        self.assertIn("[error]", log)
        self.assertIn('oip: model "m": upstream answer: invalid JSON', log)


if __name__ == "__main__":
    run_tests()
