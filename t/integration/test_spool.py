#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""oip_buffer: a request body that nginx spilled to its temporary file
and that is larger than oip_buffer is converted through files, not in
memory.  What the upstream gets is byte for byte what the in-memory path
sends, for every datatype and form; a refusal found at the end of such a
body is a clean 4xx with nothing sent; a disk that is full is a JSON 500
with nothing sent; the temporary files are gone on every end (by the
worker's open descriptors: nginx unlinks them when it opens them); and,
in the plain pass, a 256 MB conversion grows the worker by no more than
the bound."""

import gzip
import json
import os
import random
import re
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import (GatewayTestCase, IHCL, grpc_drop_server, heavy,
                     plain_only, run_tests, wait_for)
from test_signatures import META

MAIN = "thread_pool oip threads=2;"

DTYPES = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16",
          "INT32", "INT64", "FP16", "BF16", "FP32", "FP64", "BYTES"]

PACK = {"BOOL": "?", "UINT8": "B", "UINT16": "H", "UINT32": "I",
        "UINT64": "Q", "INT8": "b", "INT16": "h", "INT32": "i",
        "INT64": "q", "FP16": "e", "FP32": "f", "FP64": "d"}


def location(path, upstream, buffer, inputs="binary", extra=""):
    """Bodies above 16k are spilled (client_body_buffer_size), above
    buffer converted through files."""
    return """
        location /%s/ {{
            oip on;
            oip_buffer %s;
            oip_upstream_inputs %s;
            client_body_buffer_size 16k;
            %s
            proxy_pass http://127.0.0.1:{%s}/;
        }}
""" % (path, buffer, inputs, extra, upstream)


def values(dt, n, rnd):
    if dt == "BOOL":
        return [rnd.random() < 0.5 for _ in range(n)]
    if dt == "BYTES":
        return ["s%d-%s" % (i, "x" * rnd.randrange(40)) for i in range(n)]
    if dt.startswith("FP") or dt == "BF16":
        return [round(rnd.uniform(-100, 100), 2) for _ in range(n)]
    if dt.startswith("UINT"):
        return [rnd.randrange(0, 250) for _ in range(n)]
    return [rnd.randrange(-120, 120) for _ in range(n)]


def binary_chunk(dt, vals):
    if dt == "BYTES":
        return b"".join(struct.pack("<I", len(v)) + v.encode() for v in vals)
    if dt == "BF16":
        return b"".join(struct.pack("<f", v)[2:] for v in vals)
    return struct.pack("<%d%s" % (len(vals), PACK[dt]), *vals)


def every_datatype(rnd):
    """Every datatype's JSON data, flat and nested in turns: FP32 crosses
    a 64k window many times, BYTES the writer's block."""
    inputs = []
    for i, dt in enumerate(DTYPES):
        n = {"FP32": 30000, "BYTES": 8000}.get(dt, 1000)
        vals = values(dt, n, rnd)
        if i % 2:
            data = [vals[k:k + 10] for k in range(0, n, 10)]
            shape = [n // 10, 10]
        else:
            data, shape = vals, [n]
        inputs.append({"name": "IN_%s" % dt, "datatype": dt,
                       "shape": shape, "data": data})
    return inputs


def mixed_inputs(rnd):
    """Binary chunks and JSON data interleaved, for binary_request()."""
    ins = []
    for i, dt in enumerate(["FP32", "INT8", "BYTES", "FP16", "INT64",
                            "BYTES", "FP32"]):
        vals = values(dt, 8000, rnd)
        if i % 2 == 0 and dt != "FP16":
            ins.append(("X%d" % i, dt, [8000], None, binary_chunk(dt, vals)))
        else:
            ins.append(("X%d" % i, dt, [8000], vals, None))
    return ins


def binary_request(inputs):
    """inputs: (name, dt, shape, data or None, chunk or None); a body with
    its IHCL."""
    doc = {"inputs": []}
    tail = b""
    for name, dt, shape, data, chunk in inputs:
        t = {"name": name, "datatype": dt, "shape": shape}
        if chunk is not None:
            t["parameters"] = {"binary_data_size": len(chunk)}
            tail += chunk
        else:
            t["data"] = data
        doc["inputs"].append(t)
    head = json.dumps(doc).encode()
    return head + tail, {IHCL: str(len(head))} if tail else {}


def worker_temp_fds(ngx):
    """The temporary files the workers hold open (body, answer,
    converted)."""
    n = 0
    for pid in ngx.workers():
        base = "/proc/%d/fd" % pid
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for fd in names:
            try:
                link = os.readlink(os.path.join(base, fd))
            except OSError:
                continue
            if ("client_body" in link or "/proxy/" in link
                    or "/spool-full/" in link):
                n += 1
    return n


def files_left(ngx):
    """The workers' temporary files once none is left, or how many are
    after the wait: a request's pool (and its files) may go after its
    client has its answer."""
    return wait_for(lambda: worker_temp_fds(ngx), lambda n: n == 0)


class LogCase(GatewayTestCase):
    """A gateway whose error log is read from a point on."""

    def log_size(self):
        return os.path.getsize(os.path.join(self.ngx.dir, "error.log"))

    def log_since(self, start):
        with open(os.path.join(self.ngx.dir, "error.log"),
                  errors="replace") as f:
            f.seek(start)
            return f.read()


class Spool(LogCase):

    @classmethod
    def setUpGateway(cls):
        cls.rec = cls.start_recorder()
        cls.full = None
        server = """
        client_max_body_size 512m;
""" + "".join([
            location("spool", "rec", "64k"),
            location("memory", "rec", "1024m"),
            location("sjson", "rec", "64k", "json"),
            location("mjson", "rec", "1024m", "json"),
            location("skeep", "rec", "64k", "keep"),
            location("mkeep", "rec", "1024m", "keep"),
            location("sthread", "rec", "64k", "binary",
                     "oip_thread_pool oip threshold=1k;"),
            location("sraw", "rec", "64k", "binary",
                     "oip_raw_input INPUT0 FP32 -1;"),
            location("mraw", "rec", "1024m", "binary",
                     "oip_raw_input INPUT0 FP32 -1;"),
            location("gone", "dead", "64k"),
            # small limits: a gzip bomb refused after 8 MB inflated
            location("sbomb", "rec", "64k", "binary",
                     "oip_max_json_size 4m; oip_max_tensor_size 4m;"),
            location("mbomb", "rec", "1024m", "binary",
                     "oip_max_json_size 4m; oip_max_tensor_size 4m;"),
            # a peer that refuses first, then the recorder: a retry
            location("sretry", "rec", "64k", "keep").replace(
                "http://127.0.0.1:{rec}/", "http://retry/"),
        ])
        http = """
    upstream retry {{
        server 127.0.0.1:{dead} max_fails=0;
        server 127.0.0.1:{rec};
    }}
"""
        cls.dead = socket.socket()
        cls.dead.bind(("127.0.0.1", 0))
        dead = cls.dead.getsockname()[1]
        cls.dead.close()
        cls.ngx = cls.start_nginx(server, http=http, main=MAIN,
                                  log_level="debug", rec=cls.rec.port,
                                  dead=dead)

    def sent(self, path, body, headers=None, spooled=True):
        """What the recorder got for body posted to path."""
        self.rec.clear()
        start = self.log_size()
        st, _, out = self.ngx.post(path, body, headers or {})
        self.assertEqual(st, 200, out)
        req = self.rec.last()
        log = self.log_since(start)
        mapped = re.search(r"oip: body of \d+ bytes mapped", log)
        self.assertEqual(bool(mapped), spooled, path)
        h = req["headers"]
        return (req["body"], h.get("content-length"), h.get(IHCL.lower()),
                h.get("content-type"))

    def same(self, a, b, body, headers=None, spooled=True):
        got = self.sent("/%s/v2/models/m/infer" % a, body, headers, spooled)
        want = self.sent("/%s/v2/models/m/infer" % b, body, headers, False)
        self.assertEqual(got[1:], want[1:])
        self.assertEqual(len(got[0]), len(want[0]))
        self.assertTrue(got[0] == want[0], "bodies differ")
        self.assertEqual(files_left(self.ngx), 0)
        return got

    def test_every_datatype_json_to_binary(self):
        """Every datatype's JSON data made binary, flat and nested, the
        windows crossed many times (oip_buffer 64k)."""
        rnd = random.Random(1)
        inputs = every_datatype(rnd)
        body = json.dumps({"id": "all", "inputs": inputs}).encode()
        got = self.same("spool", "memory", body)
        self.assertIsNotNone(got[2])            # binary, converted

    def test_mixed(self):
        """Binary chunks kept and JSON made binary, interleaved: each
        chunk in its tensor's place."""
        rnd = random.Random(2)
        ins = mixed_inputs(rnd)
        body, hdrs = binary_request(ins)
        self.same("spool", "memory", body, hdrs)

    def test_binary_as_it_came(self):
        """A binary body to a binary upstream goes as it came."""
        rnd = random.Random(3)
        vals = values("FP32", 20000, rnd)
        body, hdrs = binary_request([("B", "FP32", [20000], None,
                                      binary_chunk("FP32", vals))])
        got = self.same("spool", "memory", body, hdrs)
        self.assertEqual(got[0], body)

    def test_json_kept(self):
        """Only checked: a JSON body to a JSON upstream as it came."""
        rnd = random.Random(4)
        body = json.dumps({"inputs": [
            {"name": "J", "datatype": "FP64", "shape": [15000],
             "data": values("FP64", 15000, rnd)}]}).encode()
        got = self.same("skeep", "mkeep", body)
        self.assertEqual(got[0], body)

    def test_json_header_in_a_file(self):
        """A binary body whose JSON, kept, may be larger than oip_buffer
        (its JSON data as it came): that JSON goes from a file of its own,
        then the tensors' file; small, it is copied to memory."""
        rnd = random.Random(12)
        for n, own in ((15000, True), (100, False)):
            ins = [("J", "FP64", [n], values("FP64", n, rnd), None),
                   ("B", "FP32", [30000], None,
                    binary_chunk("FP32", values("FP32", 30000, rnd)))]
            body, hdrs = binary_request(ins)
            doc = json.loads(body[:int(hdrs[IHCL])])
            # the deadline is the edit: its digits are rewritten
            doc["parameters"] = {"timeout": 60000000}
            head = json.dumps(doc).encode()
            body = head + body[int(hdrs[IHCL]):]
            hdrs = {IHCL: str(len(head))}
            start = self.log_size()
            got = self.sent("/skeep/v2/models/m/infer", body, hdrs)
            self.assertEqual("from a file of its own" in self.log_since(start),
                             own)
            want = self.sent("/mkeep/v2/models/m/infer", body, hdrs, False)
            left = json.loads(got[0][:int(got[2])])["parameters"]["timeout"]
            self.assertLess(left, 60000000)
            self.assertEqual(got[1:], want[1:])
            digits = re.compile(rb'"timeout": *\d+ *')
            self.assertTrue(digits.sub(b"", got[0]) == digits.sub(b"", want[0]),
                            "bodies differ")
            self.assertEqual(files_left(self.ngx), 0)
            if not own:
                continue
            # sent again to the next peer: both files rewound to 0
            for _ in range(2):
                start = self.log_size()
                again = self.sent("/sretry/v2/models/m/infer", body, hdrs)
                self.assertTrue(digits.sub(b"", again[0])
                                == digits.sub(b"", want[0]), "bodies differ")
                if "connect() failed" in self.log_since(start):
                    break
            else:
                self.fail("never retried")

    def test_binary_to_json(self):
        """Binary chunks made JSON for a JSON upstream."""
        rnd = random.Random(5)
        ins = [("A", "FP32", [30000], None,
                binary_chunk("FP32", values("FP32", 30000, rnd))),
               ("B", "INT16", [2000], values("INT16", 2000, rnd), None),
               ("C", "BYTES", [500], None,
                binary_chunk("BYTES", values("BYTES", 500, rnd)))]
        body, hdrs = binary_request(ins)
        got = self.same("sjson", "mjson", body, hdrs)
        self.assertIsNone(got[2])

    def test_raw(self):
        """A raw binary body (IHCL 0) given its header."""
        body = struct.pack("<50000f", *range(50000))
        got = self.same("sraw", "mraw", body, {IHCL: "0"})
        self.assertEqual(got[0][-len(body):], body)

    def test_gzip(self):
        """Encoded bodies are inflated to a file, then converted from its
        mapping: gzip (above oip_buffer by its trailer's size, its
        compressed one far below) and deflate (by its compressed size);
        broken, cut and too large ones refused as in memory."""
        rnd = random.Random(6)
        plain = json.dumps({"inputs": [
            {"name": "Z", "datatype": "FP32", "shape": [60000],
             "data": values("FP32", 60000, rnd)},
            {"name": "B", "datatype": "BYTES", "shape": [3],
             "data": ["a", "b", "c"]}]}).encode()
        body = gzip.compress(plain)
        self.assertLess(len(body), 300 * 1024)
        self.same("spool", "memory", body, {"Content-Encoding": "gzip"})
        noisy = json.dumps({"inputs": [
            {"name": "Z", "datatype": "FP64", "shape": [40000],
             "data": [rnd.random() for _ in range(40000)]}]}).encode()
        body = zlib.compress(noisy)
        self.assertGreater(len(body), 64 * 1024)
        self.same("spool", "memory", body, {"Content-Encoding": "deflate"})
        # refused as in memory, word for word
        bad = gzip.compress(plain)
        for body, status, paths in (
                (bad[:-30] + bytes(30), 400, ("spool", "memory")),
                (bad[:len(bad) // 2] + bad[-8:], 400, ("spool", "memory")),
                (bad[:-8] + bytes(4) + bad[-4:], 400, ("spool", "memory")),
                (gzip.compress(b" " * (9 * 1024 * 1024) + plain), 413,
                 ("sbomb", "mbomb"))):
            got = []
            for path in paths:
                self.rec.clear()
                start = self.log_size()
                resp = self.ngx.post("/%s/v2/models/m/infer" % path, body,
                                     {"Content-Encoding": "gzip"})
                self.assertJSONError(resp, status)
                self.assertEqual("bytes mapped" in self.log_since(start),
                                 path[0] == "s")
                self.assertEqual(self.rec.requests, [])
                got.append(resp[2])
            self.assertEqual(got[0], got[1])
            self.assertEqual(files_left(self.ngx), 0)

    def test_thread_pool(self):
        """The pass runs in a thread the same, a gzip body's inflation
        and mapping too."""
        rnd = random.Random(7)
        body = json.dumps({"inputs": [
            {"name": "T", "datatype": "FP16", "shape": [30000],
             "data": values("FP16", 30000, rnd)}]}).encode()
        for b, h in ((body, None),
                     (gzip.compress(body), {"Content-Encoding": "gzip"})):
            start = self.log_size()
            self.same("sthread", "memory", b, h)
            self.assertIn("converted in a thread", self.log_since(start))

    def test_late_refusal(self):
        """A refusal at the very end of a spilled body: a clean 400,
        nothing sent upstream, no file left."""
        rnd = random.Random(8)
        for last in ('{"name":"Z","datatype":"FP32","shape":[3],'
                     '"data":[1,2]}',
                     '{"name":"Z","datatype":"FP32","shape":[2],'
                     '"data":[1,"x"]}'):
            head = json.dumps({"inputs": [
                {"name": "A", "datatype": "FP32", "shape": [20000],
                 "data": values("FP32", 20000, rnd)}]}).encode()
            body = head[:-2] + b"," + last.encode() + b"]}"
            self.rec.clear()
            resp = self.ngx.post("/spool/v2/models/m/infer", body)
            self.assertJSONError(resp, 400)
            self.assertEqual(self.rec.requests, [])
            self.assertEqual(files_left(self.ngx), 0)

    def test_deadline(self):
        """What is left of the client's timeout is written where the
        JSON went, not where the pass wrote it."""
        rnd = random.Random(11)
        for form in ("json", "binary"):
            ins = [("A", "FP32", [30000], values("FP32", 30000, rnd),
                    None)]
            if form == "binary":
                ins.append(("B", "FP32", [2], None,
                            binary_chunk("FP32", [1.0, 2.0])))
            body, hdrs = binary_request(ins)
            doc = json.loads(body[:int(hdrs.get(IHCL, len(body)))])
            doc["parameters"] = {"timeout": 60000000}
            head = json.dumps(doc).encode()
            body = head + body[int(hdrs.get(IHCL, len(body))):]
            if form == "binary":
                hdrs = {IHCL: str(len(head))}
            got = self.sent("/spool/v2/models/m/infer", body, hdrs)
            left = json.loads(got[0][:int(got[2])])["parameters"]["timeout"]
            self.assertLess(left, 60000000)
            self.assertGreater(left, 30000000)
            # made all JSON: the digits are in the converted file
            got = self.sent("/sjson/v2/models/m/infer", body, hdrs)
            self.assertIsNone(got[2])
            left = json.loads(got[0])["parameters"]["timeout"]
            self.assertLess(left, 60000000)
            self.assertGreater(left, 30000000)

    def test_runtime_gone(self):
        """An upstream that cannot be reached: 502, no file left."""
        rnd = random.Random(9)
        body = json.dumps({"inputs": [
            {"name": "A", "datatype": "FP32", "shape": [30000],
             "data": values("FP32", 30000, rnd)}]}).encode()
        st, _, _ = self.ngx.post("/gone/v2/models/m/infer", body)
        self.assertEqual(st, 502)
        self.assertEqual(files_left(self.ngx), 0)

    def test_client_gone(self):
        """A client that leaves once its body is sent: no file left."""
        rnd = random.Random(10)
        body = json.dumps({"inputs": [
            {"name": "A", "datatype": "FP32", "shape": [30000],
             "data": values("FP32", 30000, rnd)}]}).encode()
        s = socket.create_connection(("127.0.0.1", self.ngx.port))
        s.sendall(b"POST /sthread/v2/models/m/infer HTTP/1.1\r\n"
                  b"Host: x\r\nContent-Length: %d\r\n\r\n" % len(body)
                  + body)
        s.close()
        self.assertEqual(files_left(self.ngx), 0)
        # the worker lives on
        self.same("spool", "memory", body)


class Digest(LogCase):
    """$oip_digest on bodies through files: the inputs' JSON data read
    again from the mapped body (not kept made binary), binary chunks
    hashed from it: the same digest as the in-memory path's, whatever the
    encoding, and the same bytes sent."""

    @classmethod
    def setUpGateway(cls):
        cls.rec = cls.start_recorder()
        http = """
    log_format digest '$request_uri $oip_digest';
"""
        server = """
        client_max_body_size 512m;
        oip_max_json_size 1024m;
        oip_max_tensor_size 1024m;
        access_log {dir}/digest.log digest;
""" + "".join([
            location("spool", "rec", "64k"),
            location("memory", "rec", "1024m"),
            location("skeep", "rec", "64k", "keep"),
            location("mkeep", "rec", "1024m", "keep"),
        ])
        cls.ngx = cls.start_nginx(server, http=http, log_level="debug",
                                  rec=cls.rec.port)

    def digest(self, path, body, headers=None, spooled=True):
        """The digest of body posted to path, and what was sent."""
        log = os.path.join(self.ngx.dir, "digest.log")
        before = os.path.getsize(log) if os.path.exists(log) else 0
        start = self.log_size()
        self.rec.clear()
        st, _, out = self.ngx.post("/%s/v2/models/m/infer" % path, body,
                                   headers or {})
        self.assertEqual(st, 200, out)
        self.assertEqual("bytes mapped" in self.log_since(start), spooled,
                         path)

        def line():
            with open(log) as f:
                f.seek(before)
                return f.read().strip()

        # the log phase runs once the answer is sent: waited for
        text = wait_for(line)
        uri, value = text.split()
        self.assertTrue(uri.startswith("/" + path), text)
        self.assertEqual(len(value), 64, text)
        return value, self.rec.last()["body"]

    def test_same_digest(self):
        rnd = random.Random(31)
        n = 30000
        f32 = values("FP32", n, rnd)
        i16 = values("INT16", 9000, rnd)
        strs = values("BYTES", 2000, rnd)
        doc = {"inputs": [
            {"name": "b", "datatype": "FP32", "shape": [n], "data": f32},
            {"name": "a", "datatype": "INT16", "shape": [9000],
             "data": i16},
            {"name": "s", "datatype": "BYTES", "shape": [2000],
             "data": strs}]}
        body = json.dumps(doc).encode()
        digests = set()
        for a, b in (("spool", "memory"), ("skeep", "mkeep")):
            d1, sent1 = self.digest(a, body)
            d2, sent2 = self.digest(b, body, spooled=False)
            self.assertEqual(d1, d2, a)
            self.assertTrue(sent1 == sent2, "bodies differ")
            digests.add(d1)
        # the same tensors in binary (names in another order), and gzip'd
        mixed, hdrs = binary_request([
            ("s", "BYTES", [2000], strs, None),
            ("a", "INT16", [9000], None, binary_chunk("INT16", i16)),
            ("b", "FP32", [n], None, binary_chunk("FP32", f32))])
        digests.add(self.digest("spool", mixed, hdrs)[0])
        digests.add(self.digest("spool", gzip.compress(body),
                                {"Content-Encoding": "gzip"})[0])
        self.assertEqual(len(digests), 1, digests)
        # and another for any change
        doc["inputs"][1]["data"][77] += 1
        other = self.digest("spool", json.dumps(doc).encode())[0]
        self.assertNotIn(other, digests)
        self.assertEqual(files_left(self.ngx), 0)

    @heavy
    def test_rss_128mb(self):
        """A 128 MB body digested through files grows the worker by 64 MB
        at most: its data is read again, a window at a time, for the
        digest (in memory it would be kept, made binary)."""
        count, body = big_fp32(128 * 1024 * 1024)
        pid, = self.ngx.workers()
        with open("/proc/%d/clear_refs" % pid, "w") as f:
            f.write("5")
        before = status_kb(pid, "VmRSS")
        value, sent = self.digest("spool", body)
        grown = status_kb(pid, "VmHWM") - before
        self.rec.clear()
        self.assertGreater(len(sent), 4 * count)
        self.assertLessEqual(grown, 64 * 1024,
                             "the worker grew by %d KB" % grown)


def binary_answer(outputs):
    """outputs: (name, dt, vals); an answer's body and headers."""
    doc = {"model_name": "m", "model_version": "1", "id": "a",
           "outputs": []}
    tail = b""
    for name, dt, vals in outputs:
        chunk = binary_chunk(dt, vals)
        doc["outputs"].append({"name": name, "datatype": dt,
                               "shape": [len(vals)],
                               "parameters": {"binary_data_size":
                                              len(chunk)}})
        tail += chunk
    head = json.dumps(doc).encode()
    return head + tail, {"Content-Type": "application/octet-stream",
                         IHCL: str(len(head))}


class Trickle:
    """An upstream that answers in parts, a pause before each, and may
    close before the end: parts is a list of (seconds, bytes)."""

    def __init__(self):
        self.parts = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.alive = True
        import threading
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        import threading
        while self.alive:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,),
                             daemon=True).start()

    def serve(self, c):
        try:
            f = c.makefile("rb")
            length = 0
            while True:
                line = f.readline()
                if line in (b"\r\n", b"\n", b""):
                    break
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v)
            f.read(length)
            for pause, data in list(self.parts):
                time.sleep(pause)
                c.sendall(data)
        except OSError:
            pass
        finally:
            c.close()

    def stop(self):
        self.alive = False
        self.sock.close()


def http_answer(body, headers, cut=None):
    """An HTTP/1.1 answer's bytes, its body cut at cut if given."""
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n" % len(body)
    for k, v in headers.items():
        head += b"%s: %s\r\n" % (k.encode(), v.encode())
    head += b"Connection: close\r\n\r\n"
    return head + (body if cut is None else body[:cut])


def dechunk(data):
    """An HTTP/1.1 answer's bytes: (headers text, body, whole)."""
    head, _, rest = data.partition(b"\r\n\r\n")
    out = b""
    while True:
        size, _, rest = rest.partition(b"\r\n")
        if not size:
            return head, out, False
        n = int(size, 16)
        if n == 0:
            return head, out, True
        out += rest[:n]
        rest = rest[n + 2:]


class Flow(LogCase):
    """Answers above oip_buffer, binary from the runtime, JSON for the
    client: converted as they arrive."""

    @classmethod
    def setUpGateway(cls):
        cls.rec = cls.start_recorder()
        server = """
        client_max_body_size 64m;
""" + "".join([
            location("flow", "rec", "64k", "keep",
                     "oip_upstream_outputs binary;"),
            location("held", "rec", "1024m", "keep",
                     "oip_upstream_outputs binary;"),
            location("tflow", "tr", "64k", "keep",
                     "oip_upstream_outputs binary;"),
            location("theld", "tr", "1024m", "keep",
                     "oip_upstream_outputs binary;"),
        ])
        cls.tr = Trickle()
        cls._stoppers.append(cls.tr.stop)
        cls.ngx = cls.start_nginx(server, log_level="debug",
                                  rec=cls.rec.port, tr=cls.tr.port)

    def answers(self, answer, request=None, flows=True):
        """The client's answer from both locations: (flow, held)."""
        self.rec.answer = answer
        req = request or json.dumps({"inputs": [
            {"name": "I", "datatype": "INT8", "shape": [1],
             "data": [1]}]}).encode()
        got = {}
        for path in ("flow", "held"):
            start = self.log_size()
            st, h, out = self.ngx.post("/%s/v2/models/m/infer" % path, req)
            self.assertEqual(st, 200, out[:200])
            log = self.log_since(start)
            self.assertEqual("flows: JSON" in log,
                             flows and path == "flow", path)
            got[path] = (h, out)
        return got["flow"], got["held"]

    def test_every_datatype(self):
        rnd = random.Random(11)
        outs = [("O_%s" % dt, dt, values(dt, 20000, rnd))
                for dt in DTYPES if dt != "BYTES"]
        flow, held = self.answers((200,) + binary_answer(outs)[::-1])
        self.assertEqual(flow[1], held[1])
        self.assertNotIn("content-length", flow[0])
        self.assertEqual(flow[0]["content-type"], "application/json")
        self.assertEqual(held[0]["content-type"], "application/json")
        doc = json.loads(flow[1])
        self.assertEqual(len(doc["outputs"]), len(outs))

    def test_listed_and_dropped(self):
        """Outputs the client did not list are dropped, their bytes
        skipped; one it wants binary keeps the answer held."""
        rnd = random.Random(12)
        outs = [("A", "FP32", values("FP32", 30000, rnd)),
                ("B", "INT16", values("INT16", 5000, rnd)),
                ("C", "FP64", values("FP64", 9000, rnd))]
        answer = (200,) + binary_answer(outs)[::-1]
        req = {"inputs": [{"name": "I", "datatype": "INT8", "shape": [1],
                           "data": [1]}],
               "outputs": [{"name": "C"}, {"name": "A"}]}
        flow, held = self.answers(answer, json.dumps(req).encode())
        self.assertEqual(flow[1], held[1])
        self.assertEqual([o["name"] for o in
                          json.loads(flow[1])["outputs"]], ["A", "C"])
        req["outputs"][0]["parameters"] = {"binary_data": True}
        flow, held = self.answers(answer, json.dumps(req).encode(),
                                  flows=False)
        self.assertEqual(flow[1], held[1])
        self.assertEqual(flow[0]["content-length"], str(len(flow[1])))

    def test_held_forms(self):
        """BYTES made JSON: held."""
        rnd = random.Random(13)
        outs = [("S", "BYTES", values("BYTES", 20000, rnd))]
        flow, held = self.answers((200,) + binary_answer(outs)[::-1],
                                  flows=False)
        self.assertEqual(flow[1], held[1])

    def test_chunked(self):
        """A chunked answer (no length, as KServe's) flows once its
        JSON header's sizes add up past oip_buffer; below it, held."""
        rnd = random.Random(18)
        body, hdrs = binary_answer([("F", "FP32",
                                     values("FP32", 40000, rnd))])
        hdrs["Transfer-Encoding"] = "chunked"
        flow, held = self.answers((200, hdrs, body))
        self.assertEqual(flow[1], held[1])
        body, hdrs = binary_answer([("F", "FP32", values("FP32", 4000, rnd))])
        hdrs["Transfer-Encoding"] = "chunked"
        flow, held = self.answers((200, hdrs, body), flows=False)
        self.assertEqual(flow[1], held[1])

    def test_chunked_wrong_length(self):
        """A chunked answer whose bytes are more, or fewer, than its
        JSON header declared: cut after the first byte (the held path
        answers 502)."""
        rnd = random.Random(19)
        body, hdrs = binary_answer([("F", "FP32",
                                     values("FP32", 60000, rnd))])
        for data in (body + b"\x00" * 8, body[:-8]):
            head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
            for k, v in hdrs.items():
                head += b"%s: %s\r\n" % (k.encode(), v.encode())
            half = len(data) // 2
            chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part)
                              for part in (data[:half], data[half:]))
            self.tr.parts = [(0, head + b"Connection: close\r\n\r\n"
                              + chunks + b"0\r\n\r\n")]
            start = self.log_size()
            out, _ = self.raw("tflow")
            _, text, whole = dechunk(out)
            self.assertFalse(whole)
            self.assertTrue(text.startswith(b'{"model_name"'))
            log = self.log_since(start)
            self.assertIn("flows: JSON", log)
            self.assertIn("the answer is cut", log)
            resp = self.ngx.post("/theld/v2/models/m/infer", b'{"inputs":[{'
                                 b'"name":"I","datatype":"INT8","shape":[1],'
                                 b'"data":[1]}]}')
            self.assertJSONError(resp, 502)

    def raw(self, path, body=None, slow=0):
        """The gateway's answer to a request, read as it comes
        (slowly if asked): its bytes, and the time of its first body
        byte after the request was sent."""
        req = body or b'{"inputs":[{"name":"I","datatype":"INT8",' \
                      b'"shape":[1],"data":[1]}]}'
        s = socket.create_connection(("127.0.0.1", self.ngx.port),
                                     timeout=60)
        s.sendall(b"POST /%s/v2/models/m/infer HTTP/1.1\r\nHost: x\r\n"
                  b"Connection: close\r\nContent-Length: %d\r\n\r\n"
                  % (path.encode(), len(req)) + req)
        t0 = time.time()
        first = None
        data = b""
        while True:
            part = s.recv(4096 if slow else 65536)
            if not part:
                break
            data += part
            if first is None and b"\r\n\r\n" in data \
                    and len(data.partition(b"\r\n\r\n")[2]) > 0:
                first = time.time() - t0
            if slow:
                time.sleep(slow)
        s.close()
        return data, first

    def test_runtime_cut(self):
        """A runtime that fails after the first byte: the client's
        answer is cut (no last chunk), where the held path says 502."""
        rnd = random.Random(14)
        body, hdrs = binary_answer([("F", "FP32",
                                     values("FP32", 60000, rnd))])
        self.tr.parts = [(0, http_answer(body, hdrs, cut=len(body) // 2))]
        data, _ = self.raw("tflow")
        head, out, whole = dechunk(data)
        self.assertIn(b" 200 ", head.split(b"\r\n")[0])
        self.assertFalse(whole)
        self.assertTrue(out.startswith(b'{"model_name"'))
        resp = self.ngx.post("/theld/v2/models/m/infer", b'{"inputs":[{'
                             b'"name":"I","datatype":"INT8","shape":[1],'
                             b'"data":[1]}]}')
        self.assertJSONError(resp, 502)

    def test_bad_bool(self):
        """A BOOL byte that is neither 0 nor 1, late in the answer: cut,
        where the held path says 502."""
        vals = [True] * 100000
        body, hdrs = binary_answer([("B", "BOOL", vals)])
        body = body[:-10] + b"\x07" + body[-9:]
        self.tr.parts = [(0, http_answer(body, hdrs))]
        data, _ = self.raw("tflow")
        _, out, whole = dechunk(data)
        self.assertFalse(whole)
        resp = self.ngx.post("/theld/v2/models/m/infer", b'{"inputs":[{'
                             b'"name":"I","datatype":"INT8","shape":[1],'
                             b'"data":[1]}]}')
        self.assertJSONError(resp, 502, "BOOL")

    @plain_only
    def test_first_byte_early(self):
        """The answer starts while the runtime still sends it: its
        second half comes 1.5 s after the first (timing: the plain pass
        only)."""
        rnd = random.Random(15)
        body, hdrs = binary_answer([("F", "FP32",
                                     values("FP32", 100000, rnd))])
        whole = http_answer(body, hdrs)
        half = len(whole) // 2
        self.tr.parts = [(0, whole[:half]), (1.5, whole[half:])]
        data, first = self.raw("tflow")
        self.assertTrue(dechunk(data)[2])
        self.assertLess(first, 1.2)

    def test_slow_client(self):
        """A slow reader gets the answer whole, the same as the held
        path's: the runtime's answer waits in nginx's buffers."""
        rnd = random.Random(15)
        body, hdrs = binary_answer([("F", "FP32",
                                     values("FP32", 100000, rnd))])
        self.tr.parts = [(0, http_answer(body, hdrs))]
        slow, _ = self.raw("tflow", slow=0.002)
        head, out, done = dechunk(slow)
        self.assertTrue(done)
        st, _, held = self.ngx.post("/theld/v2/models/m/infer", b'{"inputs"'
                                    b':[{"name":"I","datatype":"INT8",'
                                    b'"shape":[1],"data":[1]}]}')
        self.assertEqual(held, out)

    def test_http2(self):
        """Over HTTP/2: DATA frames, the same bytes."""
        rnd = random.Random(16)
        outs = [("F", "FP16", values("FP16", 50000, rnd))]
        self.rec.answer = (200,) + binary_answer(outs)[::-1]
        req = '{"inputs":[{"name":"I","datatype":"INT8","shape":[1],' \
              '"data":[1]}]}'
        got = []
        for path in ("flow", "held"):
            st, out = self.ngx.curl("-X", "POST", "--data-binary", req,
                                    "{base}/%s/v2/models/m/infer" % path,
                                    h2=True)
            self.assertEqual(st, 200)
            got.append(out)
        self.assertEqual(got[0], got[1])


def json_answer(outputs):
    """outputs: (name, dt, vals); a JSON answer's body and headers."""
    doc = {"model_name": "m", "model_version": "1", "id": "a",
           "outputs": [{"name": name, "datatype": dt, "shape": [len(vals)],
                        "data": vals} for name, dt, vals in outputs]}
    return json.dumps(doc).encode(), {"Content-Type": "application/json"}


def wish(binary, names=None):
    """A JSON request whose client wants its outputs binary or not
    (names: those listed, each (name, binary))."""
    req = {"inputs": [{"name": "I", "datatype": "INT8", "shape": [1],
                       "data": [1]}],
           "parameters": {"binary_data_output": binary}}
    if names:
        req["outputs"] = [{"name": n, "parameters": {"binary_data": b}}
                          for n, b in names]
    return json.dumps(req).encode()


class Held(LogCase):
    """Answers above oip_buffer that must be held whole to be converted
    (JSON made binary, an output kept binary, BYTES made JSON, one as it
    came, one of no length): held in a file, not in memory, and sent from
    files, the same bytes as the memory path's, through gzip, HTTP/2 and
    a slow reader too; the files gone after."""

    @classmethod
    def setUpGateway(cls):
        cls.rec = cls.start_recorder()
        js = "oip_upstream_outputs json;"
        bs = "oip_upstream_outputs binary;"
        # a filter below that needs the answer in memory
        sub = js + (" sub_filter_types *; sub_filter_once off;"
                    " sub_filter 'not-in-any-answer' 'x';")
        server = "".join([
            location("file", "rec", "64k", "keep", js),
            location("mem", "rec", "1024m", "keep", js),
            location("bfile", "rec", "64k", "keep", bs),
            location("bmem", "rec", "1024m", "keep", bs),
            location("sfile", "rec", "64k", "keep", sub),
            location("smem", "rec", "1024m", "keep", sub),
            location("tfile", "tr", "64k", "keep", js),
            location("cfile", "rec", "64k", "keep", bs + """
            proxy_cache infer;
            proxy_cache_valid 200 10m;
            proxy_cache_methods POST;
            proxy_cache_key "$oip_digest";"""),
        ])
        http = """
    proxy_cache_path {dir}/cache levels=1:2 keys_zone=infer:1m
                     max_size=64m use_temp_path=off;
"""
        cls.tr = Trickle()
        cls._stoppers.append(cls.tr.stop)
        cls.ngx = cls.start_nginx(server, http=http, log_level="debug",
                                  rec=cls.rec.port, tr=cls.tr.port)

    def answers(self, answer, request, files=True, paths=("file", "mem"),
                headers=None):
        """The client's answer from both locations, the first through
        files (if files): (status, headers, body) each."""
        self.rec.answer = answer
        got = []
        for path in paths:
            start = self.log_size()
            resp = self.ngx.post("/%s/v2/models/m/infer" % path, request,
                                 headers or {})
            self.assertEqual(resp[0], 200, resp[2][:200])
            log = self.log_since(start)
            self.assertEqual("sent from files" in log,
                             files and path == paths[0], path)
            got.append(resp)
        self.assertEqual(files_left(self.ngx), 0)
        return got

    def same(self, answer, request, files=True, paths=("file", "mem")):
        a, b = self.answers(answer, request, files, paths)
        for k in ("content-length", "content-type", IHCL.lower()):
            self.assertEqual(a[1].get(k), b[1].get(k), k)
        self.assertEqual(len(a[2]), len(b[2]))
        self.assertTrue(a[2] == b[2], "bodies differ")
        return a

    def test_json_to_binary(self):
        rnd = random.Random(21)
        outs = [("O_%s" % dt, dt, values(dt, 6000, rnd)) for dt in DTYPES]
        body, hdrs = json_answer(outs)
        got = self.same((200, hdrs, body), wish(True))
        self.assertIn(IHCL.lower(), got[1])

    def test_kept_binary_and_bytes(self):
        """An output the client wants binary, BYTES it wants as JSON: the
        answer is held, in a file."""
        rnd = random.Random(22)
        outs = [("A", "FP32", values("FP32", 30000, rnd)),
                ("S", "BYTES", values("BYTES", 3000, rnd)),
                ("C", "INT16", values("INT16", 5000, rnd))]
        answer = (200,) + binary_answer(outs)[::-1]
        b = ("bfile", "bmem")
        start = self.log_size()
        got = self.same(answer, wish(False, [("A", True), ("S", False),
                                             ("C", False)]), paths=b)
        self.assertIn(IHCL.lower(), got[1])
        # its JSON, with S and C printed, larger than oip_buffer: a file
        self.assertIn("JSON %s from a file of its own" % got[1][IHCL.lower()],
                      self.log_since(start))
        got = self.same(answer, wish(False), paths=b)
        self.assertNotIn(IHCL.lower(), got[1])

    def test_as_it_came(self):
        """Binary for a binary client: sent from the answer's own
        file."""
        rnd = random.Random(23)
        answer = (200,) + binary_answer(
            [("A", "FP64", values("FP64", 20000, rnd))])[::-1]
        got = self.same(answer, wish(True), paths=("bfile", "bmem"))
        self.assertEqual(got[2], answer[2])

    def test_no_length(self):
        """A chunked answer goes to its file once past oip_buffer."""
        rnd = random.Random(24)
        body, hdrs = json_answer([("F", "FP32", values("FP32", 40000, rnd))])
        hdrs["Transfer-Encoding"] = "chunked"
        self.same((200, hdrs, body), wish(True))

    def test_sub_filter(self):
        """A filter below that needs the answer in memory (sub, gzip):
        the files are read through nginx's output chain, a few buffers
        at a time."""
        rnd = random.Random(25)
        body, hdrs = json_answer([("F", "FP32", values("FP32", 40000, rnd)),
                                  ("S", "BYTES", values("BYTES", 2000, rnd))])
        a, b = self.answers((200, hdrs, body), wish(True),
                            paths=("sfile", "smem"))
        self.assertNotIn("content-length", a[1])
        self.assertTrue(a[2] == b[2], "bodies differ")

    def test_http2(self):
        rnd = random.Random(26)
        body, hdrs = json_answer([("F", "FP16", values("FP16", 50000, rnd))])
        self.rec.answer = (200, hdrs, body)
        got = []
        for path in ("file", "mem"):
            st, out = self.ngx.curl("-X", "POST", "--data-binary",
                                    wish(True).decode(),
                                    "{base}/%s/v2/models/m/infer" % path,
                                    h2=True)
            self.assertEqual(st, 200)
            got.append(out)
        self.assertTrue(got[0] == got[1], "bodies differ")

    def test_slow_client(self):
        """A slow reader: the files are read as it takes the answer."""
        rnd = random.Random(27)
        body, hdrs = json_answer([("F", "FP32", values("FP32", 60000, rnd))])
        self.tr.parts = [(0, http_answer(body, hdrs))]
        req = wish(True)
        s = socket.create_connection(("127.0.0.1", self.ngx.port),
                                     timeout=60)
        s.sendall(b"POST /tfile/v2/models/m/infer HTTP/1.1\r\nHost: x\r\n"
                  b"Connection: close\r\nContent-Length: %d\r\n\r\n"
                  % len(req) + req)
        data = b""
        while True:
            part = s.recv(8192)
            if not part:
                break
            data += part
            time.sleep(0.002)
        s.close()
        head, _, out = data.partition(b"\r\n\r\n")
        self.rec.answer = (200, hdrs, body)
        st, h, want = self.ngx.post("/mem/v2/models/m/infer", req)
        self.assertIn(b"Content-Length: %d" % len(want), head)
        self.assertTrue(out == want, "bodies differ")

    def test_cached(self):
        """An answer from nginx's cache, which does not flow, is held in
        files: the same bytes as the runtime's answer made JSON as it
        arrived, but for the id (another request's)."""
        rnd = random.Random(30)
        self.rec.answer = (200,) + binary_answer(
            [("F", "FP32", values("FP32", 50000, rnd))])[::-1]
        self.rec.clear()
        req = wish(False)
        got = []
        for _ in range(2):
            start = self.log_size()
            st, h, out = self.ngx.post("/cfile/v2/models/m/infer", req)
            self.assertEqual(st, 200, out[:200])
            got.append((out, self.log_since(start)))
        self.assertEqual(len(self.rec.requests), 1)
        self.assertIn("flows: JSON", got[0][1])
        self.assertIn("sent from files", got[1][1])
        # the runtime's id is not given with another request's answer
        self.assertTrue(got[0][0].replace(b'"id": "a", ', b"", 1)
                        == got[1][0], "bodies differ")
        self.assertEqual(files_left(self.ngx), 0)

    def test_client_gone(self):
        """A client that leaves while its answer is sent from files
        (after its first bytes): the files gone, the worker on."""
        rnd = random.Random(29)
        body, hdrs = json_answer([("F", "FP64", values("FP64", 300000,
                                                       rnd))])
        self.rec.answer = (200, hdrs, body)
        req = wish(True)
        start = self.log_size()
        s = socket.create_connection(("127.0.0.1", self.ngx.port),
                                     timeout=60)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"POST /sfile/v2/models/m/infer HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(req) + req)
        self.assertTrue(s.recv(4096))
        self.assertTrue(wait_for(lambda: "sent from files"
                                 in self.log_since(start)))
        s.close()
        self.assertEqual(files_left(self.ngx), 0)
        self.same((200, hdrs, body), req, paths=("sfile", "smem"))

    def test_runtime_cut(self):
        """A runtime that fails before the end: a JSON 502, as held in
        memory, and the file gone."""
        rnd = random.Random(28)
        body, hdrs = json_answer([("F", "FP32", values("FP32", 60000, rnd))])
        self.tr.parts = [(0, http_answer(body, hdrs, cut=len(body) // 2))]
        start = self.log_size()
        resp = self.ngx.post("/tfile/v2/models/m/infer", wish(True))
        self.assertJSONError(resp, 502)
        self.assertIn("held in", self.log_since(start))
        self.assertEqual(files_left(self.ngx), 0)


def big_fp32(size):
    """A JSON FP32 request of about size bytes, made quickly."""
    unit = b"1.25,-3.5,0.125,7.75,"
    n = size // len(unit)
    return 4 * n, (b'{"inputs":[{"name":"I","datatype":"FP32","shape":[%d],'
            b'"data":[' % (4 * n) + (unit * n)[:-1] + b"]}]}")


def status_kb(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


@heavy
class Memory(GatewayTestCase):
    """The bound itself, in the plain pass (not under ASan or valgrind,
    whose own memory would be measured): one worker's peak RSS, reset
    with clear_refs, while it converts a 256 MB JSON request."""

    @classmethod
    def setUpGateway(cls):
        cls.rec = cls.start_recorder()
        server = """
        client_max_body_size 1024m;
        oip_max_json_size 1024m;
        oip_max_tensor_size 1024m;
        location /big/ {{
            oip on;
            oip_upstream_inputs binary;
            proxy_pass http://127.0.0.1:{rec}/;
        }}
        location /abig/ {{
            oip on;
            oip_upstream_outputs binary;
            proxy_max_temp_file_size 2048m;
            proxy_pass http://127.0.0.1:{rec}/;
        }}
        location /jin/ {{
            oip on;
            oip_upstream_inputs json;
            proxy_pass http://127.0.0.1:{rec}/;
        }}
        location /jbig/ {{
            oip on;
            oip_upstream_outputs json;
            proxy_max_temp_file_size 2048m;
            proxy_pass http://127.0.0.1:{rec}/;
        }}
        location /tbig/ {{
            oip on;
            oip_upstream_inputs binary;
            oip_thread_pool oip threshold=1m;
            proxy_pass http://127.0.0.1:{rec}/;
        }}
        location /gbig/ {{
            oip on;
            oip_upstream_protocol grpc;
            oip_grpc_max_message 1024m;
            rewrite ^/gbig(/.*)$ $1 break;
            grpc_pass grpc://127.0.0.1:{grpc};
        }}
        location /gtbig/ {{
            oip on;
            oip_upstream_protocol grpc;
            oip_grpc_contents typed;
            oip_grpc_max_message 1024m;
            rewrite ^/gtbig(/.*)$ $1 break;
            grpc_pass grpc://127.0.0.1:{grpc};
        }}
"""
        grpc_port, grpc_server = grpc_drop_server()
        cls._stoppers.append(lambda: grpc_server.stop(None))
        cls.ngx = cls.start_nginx(server, main=MAIN, log_level="debug",
                                  rec=cls.rec.port, grpc=grpc_port)

    def reset_peak(self):
        """The one worker, its peak RSS reset, and its RSS in KB."""
        pid, = self.ngx.workers()
        with open("/proc/%d/clear_refs" % pid, "w") as f:
            f.write("5")
        return pid, status_kb(pid, "VmRSS")

    def test_rss_256mb(self):
        """A 256 MB conversion grows the worker by 64 MB at most (the
        in-memory path grows it by more than the body)."""
        count, body = big_fp32(256 * 1024 * 1024)
        pid, before = self.reset_peak()
        st, _, out = self.ngx.post("/big/v2/models/m/infer", body,
                                   timeout=120)
        self.assertEqual(st, 200, out)
        grown = status_kb(pid, "VmHWM") - before
        req = self.rec.last()
        self.rec.clear()
        ihcl = int(req["headers"][IHCL.lower()])
        self.assertEqual(len(req["body"]) - ihcl, 4 * count)
        self.assertLessEqual(grown, 64 * 1024,
                             "the worker grew by %d KB" % grown)
        self.assertEqual(files_left(self.ngx), 0)

    def test_grpc_rss_128mb(self):
        """A 128 MB body translated to gRPC: the raw contents from the
        converted file, the worker grown by 64 MB at most (in memory:
        the body and the message: 226 MB)."""
        count, body = big_fp32(128 * 1024 * 1024)
        pid, before = self.reset_peak()
        st, _, out = self.ngx.post("/gbig/v2/models/m/infer", body,
                                   timeout=120)
        self.assertEqual(st, 200, out)
        grown = status_kb(pid, "VmHWM") - before
        self.assertLessEqual(grown, 64 * 1024,
                             "the worker grew by %d KB" % grown)
        self.assertEqual(files_left(self.ngx), 0)

    def test_grpc_typed_rss_80mb(self):
        """An 80 MB body translated to gRPC's typed contents: 16 MB of
        INT32 JSON data, then a 64 MB INT32 chunk, their negatives ten
        bytes each (a 130 MB message); the JSON data read back from the
        head file, the chunk read twice (measured, then written) where
        it lies, its pages let go each time: the worker grown by 64 MB
        at most (34 MB; in memory: 225 MB)."""
        unit = b"1,-3,100000,-7,"
        n = (16 << 20) // len(unit)
        count = 16 << 20
        head = (b'{"inputs":[{"name":"I","datatype":"INT32","shape":[%d],'
                b'"data":[%s]},{"name":"K","datatype":"INT32","shape":[%d],'
                b'"parameters":{"binary_data_size":%d}}]}'
                % (4 * n, (unit * n)[:-1], count, 4 * count))
        chunk = struct.pack("<4i", 1, -3, 100000, -7) * (count // 4)
        pid, before = self.reset_peak()
        st, _, out = self.ngx.post("/gtbig/v2/models/m/infer", head + chunk,
                                   {IHCL: str(len(head))}, timeout=120)
        self.assertEqual(st, 200, out)
        grown = status_kb(pid, "VmHWM") - before
        self.assertLessEqual(grown, 64 * 1024,
                             "the worker grew by %d KB" % grown)
        self.assertEqual(files_left(self.ngx), 0)

    def test_json_request_rss(self):
        """A 48 MB binary body made JSON for the upstream (132 MB of it):
        the JSON is written to the file whole, not built in memory; the
        worker grows by 64 MB at most."""
        n = 12 * 1024 * 1024
        head = json.dumps({"inputs": [
            {"name": "I", "datatype": "FP32", "shape": [n],
             "parameters": {"binary_data_size": 4 * n}}]}).encode()
        body = head + struct.pack("<f", 1.2345678) * n
        pid, before = self.reset_peak()
        st, _, out = self.ngx.post("/jin/v2/models/m/infer", body,
                                   {IHCL: str(len(head))}, timeout=120)
        self.assertEqual(st, 200, out)
        grown = status_kb(pid, "VmHWM") - before
        sent = self.rec.last()["body"]
        self.rec.clear()
        self.assertGreater(len(sent), 10 * n)
        self.assertTrue(sent.endswith(b"1.2345678]}]}"), sent[-40:])
        self.assertLessEqual(grown, 64 * 1024,
                             "the worker grew by %d KB" % grown)

    def test_gzip_rss_128mb(self):
        """A gzip body of 128 MB inflated (1 MB sent) is inflated to a
        file, then converted from it: the worker grows by 64 MB at most
        (in memory, by more than the body)."""
        count, body = big_fp32(128 * 1024 * 1024)
        body = gzip.compress(body, 1)
        pid, before = self.reset_peak()
        st, _, out = self.ngx.post("/big/v2/models/m/infer", body,
                                   {"Content-Encoding": "gzip"},
                                   timeout=120)
        self.assertEqual(st, 200, out)
        grown = status_kb(pid, "VmHWM") - before
        req = self.rec.last()
        self.rec.clear()
        self.assertNotIn("content-encoding", req["headers"])
        ihcl = int(req["headers"][IHCL.lower()])
        self.assertEqual(len(req["body"]) - ihcl, 4 * count)
        self.assertLessEqual(grown, 64 * 1024,
                             "the worker grew by %d KB" % grown)
        self.assertEqual(files_left(self.ngx), 0)

    def test_answer_rss_128mb(self):
        """A 128 MB binary answer made JSON as it arrives grows the
        worker by 64 MB at most (held, by more than the answer)."""
        n = 32 * 1024 * 1024
        head = json.dumps({"model_name": "m", "outputs": [
            {"name": "O", "datatype": "FP32", "shape": [n],
             "parameters": {"binary_data_size": 4 * n}}]}).encode()
        self.rec.answer = (200, {"Content-Type": "application/octet-stream",
                                 IHCL: str(len(head))},
                           head + b"\x00\x00\xc0\x3f" * n)
        pid, before = self.reset_peak()
        st, h, out = self.ngx.post("/abig/v2/models/m/infer",
                                   b'{"inputs":[{"name":"I","datatype":'
                                   b'"INT8","shape":[1],"data":[1]}]}',
                                   timeout=120)
        grown = status_kb(pid, "VmHWM") - before
        self.rec.answer = None
        self.rec.clear()
        self.assertEqual(st, 200, out[:200])
        self.assertNotIn("content-length", h)
        self.assertTrue(out.endswith(b"1.5,1.5]}]}"), out[-40:])
        self.assertEqual(out.count(b"1.5"), n)
        self.assertLessEqual(grown, 64 * 1024,
                             "the worker grew by %d KB" % grown)

    def test_held_answer_rss_128mb(self):
        """A 128 MB JSON answer made binary, which must be held whole:
        held in a file, the worker grows by 64 MB at most."""
        n = 32 * 1024 * 1024
        self.rec.answer = (200, {"Content-Type": "application/json"},
                           b'{"model_name":"m","outputs":[{"name":"O",'
                           b'"datatype":"FP32","shape":[%d],"data":[' % n
                           + b"1.5," * (n - 1) + b"1.5]}]}")
        pid, before = self.reset_peak()
        st, h, out = self.ngx.post("/jbig/v2/models/m/infer", wish(True),
                                   timeout=120)
        grown = status_kb(pid, "VmHWM") - before
        self.rec.answer = None
        self.rec.clear()
        self.assertEqual(st, 200, out[:200])
        ihcl = int(h[IHCL.lower()])
        self.assertEqual(len(out) - ihcl, 4 * n)
        self.assertEqual(out[-8:], b"\x00\x00\xc0\x3f" * 2)
        self.assertLessEqual(grown, 64 * 1024,
                             "the worker grew by %d KB" % grown)
        self.assertEqual(files_left(self.ngx), 0)

    def test_reload_mid_conversion(self):
        """A reload while a big body converts in a thread: the old
        worker finishes it, the answer is whole, no file is left."""
        _, body = big_fp32(64 * 1024 * 1024)
        log = os.path.join(self.ngx.dir, "error.log")
        start = os.path.getsize(log)
        out = {}

        def post():
            out["r"] = self.ngx.post("/tbig/v2/models/m/infer", body,
                                     timeout=120)

        import threading
        t = threading.Thread(target=post)
        t.start()

        def mapped():
            with open(log, errors="replace") as f:
                f.seek(start)
                return "converted in a thread" in f.read()

        self.assertTrue(wait_for(mapped, timeout=60))
        os.kill(self.ngx.proc.pid, 1)
        t.join(120)
        st, _, text = out["r"]
        self.assertEqual(st, 200, text)
        self.rec.clear()
        self.assertEqual(files_left(self.ngx), 0)


class FlowRuntimes(LogCase):
    """In front of the example runtime's families that answer binary
    (Triton's, KServe's, OpenVINO's: MLServer answers JSON only), as
    they really answer: an answer above oip_buffer flows, the same
    bytes as held; KServe's binary answers are chunked (no length):
    they flow by their JSON header's sizes."""

    FAMILIES = ["triton", "kserve", "openvino"]

    @classmethod
    def setUpGateway(cls):
        server = "client_max_body_size 64m;\n"
        ports = {}
        for family in cls.FAMILIES:
            rt = cls.start_runtime(family)
            ports[family] = rt.port
            for path, buf in (("flow", "64k"), ("held", "1024m")):
                server += location("%s-%s" % (family, path), family, buf,
                                   "binary", "oip_upstream_outputs binary;")
        cls.ngx = cls.start_nginx(server, log_level="debug", **ports)

    def test_families(self):
        rnd = random.Random(17)
        # listed: OVMS answers binary only for listed outputs
        body = json.dumps({"inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [1, 40000],
             "data": values("FP32", 40000, rnd)}],
            "outputs": [{"name": "OUTPUT0"}]}).encode()
        for family in self.FAMILIES:
            got = {}
            for path in ("flow", "held"):
                start = self.log_size()
                st, h, out = self.ngx.post("/%s-%s/v2/models/identity/infer"
                                           % (family, path), body)
                self.assertEqual(st, 200, (family, out[:200]))
                flows = path == "flow"
                self.assertEqual("flows: JSON" in self.log_since(start),
                                 flows, family)
                self.assertEqual("content-length" not in h, flows, family)
                # KServe's family gives each answer an id of its own
                got[path] = re.sub(rb'"id":"[^"]*"', b'"id":""', out)
            self.assertEqual(got["flow"], got["held"], family)
            self.assertEqual(len(json.loads(got["held"])["outputs"][0]
                                 ["data"]), 40000)


class Everything(LogCase):
    """The rest on the files' path, in front of the example runtime's
    Triton family: the model's signature (identity_fp32: INPUT0 FP32
    [-1]) checks and re-types a body through files as in memory, its
    misfit refused with nothing sent; the variables and the metrics
    count it as the memory path does."""

    @classmethod
    def setUpGateway(cls):
        cls.rt = cls.start_runtime("triton")
        http = """
    oip_metrics_zone zone=metrics:1m models=4;
    oip_signature_zone zone=models:1m;
    log_format vars '$oip_model $oip_inputs $oip_elements $oip_tensor_bytes '
                    '$oip_in_form $oip_upstream_form $oip_reason';
"""
        # the signatures' metadata location, as test_signatures makes it
        meta = META.format(name="", port=cls.rt.port, timeout="2s").replace(
            "{", "{{").replace("}", "}}") + """
        location = /metrics {{
            oip_metrics;
        }}
"""
        sig = ("oip_signatures /_oip_meta zone=models;\n"
               "            oip_signature_coerce on;\n"
               "            access_log {dir}/vars.log vars;")
        server = ("client_max_body_size 64m;\n" + meta
                  + location("files", "rt", "64k", "binary", sig)
                  + location("memory", "rt", "1024m", "binary", sig))
        cls.ngx = cls.start_nginx(server, http=http, log_level="debug",
                                  rt=cls.rt.port)

    def counted(self, n):
        """oip_requests_total's samples once n requests are counted."""
        def scrape():
            body = self.ngx.request("GET", "/metrics")[2].decode()
            return [l for l in body.splitlines()
                    if l.startswith("oip_requests_total{")]
        return wait_for(scrape, lambda ls: sum(
            float(l.rsplit(" ", 1)[1]) for l in ls) >= n)

    def vars_lines(self, n):
        path = os.path.join(self.ngx.dir, "vars.log")

        def lines():
            try:
                with open(path) as f:
                    return f.read().splitlines()
            except OSError:
                return []
        return wait_for(lines, lambda ls: len(ls) >= n)

    def test_signature_metrics_variables(self):
        rnd = random.Random(32)
        n = 40000
        # FP64 declared, FP32 the signature's: re-typed, as in memory
        good = json.dumps({"inputs": [
            {"name": "INPUT0", "datatype": "FP64", "shape": [n],
             "data": values("FP32", n, rnd)}]}).encode()
        bad = json.dumps({"inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [n],
             "data": values("FP32", n, rnd)},
            {"name": "EXTRA", "datatype": "FP32", "shape": [1],
             "data": [1.0]}]}).encode()
        got = {}
        for path in ("files", "memory"):
            start = self.log_size()
            st, _, out = self.ngx.post("/%s/v2/models/identity_fp32/infer"
                                       % path, good)
            self.assertEqual(st, 200, out[:300])
            got[path] = out
            resp = self.ngx.post("/%s/v2/models/identity_fp32/infer"
                                 % path, bad)
            self.assertJSONError(resp, 400, "EXTRA")
            got[path + "-bad"] = resp[2]
            self.assertEqual(self.log_since(start).count("bytes mapped"),
                             2 if path == "files" else 0)
        self.assertEqual(got["files"], got["memory"])
        self.assertEqual(got["files-bad"], got["memory-bad"])
        lines = self.vars_lines(4)
        self.assertEqual(lines[0], lines[2])
        self.assertEqual(lines[1], lines[3])
        self.assertTrue(lines[0].startswith("identity_fp32 1 40000 160000 "),
                        lines[0])
        self.assertTrue(lines[1].endswith(" signature"), lines[1])
        samples = self.counted(4)
        for line in ('{model="identity_fp32",outcome="converted",code="200"}'
                     ' 2', '{model="identity_fp32",outcome="rejected",'
                     'code="400"} 2'):
            self.assertIn("oip_requests_total" + line, samples)
        self.assertEqual(files_left(self.ngx), 0)


class Grpc(LogCase):
    """A body above oip_buffer translated to gRPC goes through files too:
    the raw contents end the ModelInferRequest from the converted file,
    each led by its field's tag and length, and the message is byte for
    byte the one memory writes (the example gRPC runtime keeps each
    message as its bytes came: OIP_GOLDEN_DIR).  oip_grpc_max_message
    and a late refusal refuse as in memory, with nothing sent; the
    client's deadline goes upstream as what is left of it.  Typed
    contents too: the pass's tensors are read back from the head file,
    the inputs' and outputs' entries written to the converted one."""

    @classmethod
    def setUpGateway(cls):
        cls.golden = tempfile.mkdtemp(prefix="oip-spool-grpc-")
        # typed contents are read as Triton reads them, by any runtime
        cls.rt = cls.start_grpc_runtime(["--max-message", str(256 << 20)],
                                        env={"OIP_GOLDEN_DIR": cls.golden})

        def loc(path, buffer, rt="rt", extra="", most="128m"):
            return """
        location /%s/ {{
            oip on;
            oip_buffer %s;
            oip_grpc_max_message %s;
            client_body_buffer_size 16k;
            %s
            rewrite ^/%s(/.*)$ $1 break;
            grpc_pass grpc://127.0.0.1:{%s};
        }}
""" % (path, buffer, most, extra, path, rt)
        server = ("client_max_body_size 256m;\n"
                  "        oip_upstream_protocol grpc;\n"
                  + loc("files", "64k") + loc("memory", "1024m")
                  + loc("fraw", "64k", "rt", "oip_raw_input INPUT0 FP32 -1;")
                  + loc("mraw", "1024m", "rt",
                        "oip_raw_input INPUT0 FP32 -1;")
                  + loc("fsmall", "64k", most="1m")
                  + loc("msmall", "1024m", most="1m")
                  + loc("ftyped", "64k", "rt", "oip_grpc_contents typed; "
                        "oip_thread_pool oip threshold=64k;")
                  + loc("mtyped", "1024m", "rt", "oip_grpc_contents typed;"))
        cls.ngx = cls.start_nginx(server, main=MAIN, log_level="debug",
                                  rt=cls.rt.port)
        cls.n = 0

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        subprocess.call(["rm", "-rf", cls.golden])

    def post(self, path, body, headers=None, model="identity",
             call="infer"):
        """(status, headers, client's answer, the message the runtime
        got or None, whether the body went through files)."""
        type(self).n += 1
        n = str(type(self).n)
        start = self.log_size()
        st, h, out = self.ngx.post("/%s/v2/models/%s/%s"
                                   % (path, model, call), body,
                                   dict(headers or {},
                                        **{"X-Oip-Golden": n}))
        mapped = bool(re.search(r"oip: body of \d+ bytes mapped",
                                self.log_since(start)))
        pb = os.path.join(self.golden, n + ".pb")
        msg = None
        if os.path.exists(pb):
            # written before the runtime answered
            with open(pb, "rb") as f:
                msg = f.read()
        return st, h, out, msg, mapped

    def same(self, a, b, body, headers=None):
        got = self.post(a, body, headers)
        want = self.post(b, body, headers)
        self.assertEqual(got[0], 200, got[2][:300])
        self.assertEqual(want[0], 200, want[2][:300])
        self.assertEqual((got[4], want[4]), (True, False))
        self.assertEqual(len(got[3]), len(want[3]))
        self.assertTrue(got[3] == want[3], "messages differ")
        self.assertEqual(got[2], want[2])
        self.assertEqual(files_left(self.ngx), 0)
        return got

    def test_every_datatype(self):
        """Every datatype's JSON data made raw contents, FP32 crossing
        the 64k window many times, BYTES measured before they are
        written."""
        rnd = random.Random(41)
        inputs = every_datatype(rnd)
        body = json.dumps({"id": "all", "parameters": {"k": "v"},
                           "inputs": inputs,
                           "outputs": [{"name": "IN_FP32"},
                                       {"name": "IN_BYTES"}]}).encode()
        self.same("files", "memory", body)

    def test_mixed_gzip_raw(self):
        """Binary chunks copied into their places between JSON made
        binary; a gzip body inflated to a file first; a raw body given
        its header; an empty tensor's entry."""
        rnd = random.Random(42)
        ins = mixed_inputs(rnd)
        ins.append(("EMPTY", "FP32", [0], [], None))
        body, hdrs = binary_request(ins)
        self.same("files", "memory", body, hdrs)
        plain = json.dumps({"inputs": [
            {"name": "Z", "datatype": "FP32", "shape": [60000],
             "data": values("FP32", 60000, rnd)}]}).encode()
        self.same("files", "memory", gzip.compress(plain),
                  {"Content-Encoding": "gzip"})
        raw = struct.pack("<50000f", *range(50000))
        got = self.same("fraw", "mraw", raw, {IHCL: "0"})
        self.assertEqual(got[3][-len(raw):], raw)

    def test_refused_as_in_memory(self):
        """A message over oip_grpc_max_message, and a misfit at the very
        end of a body: the same 4xx, word for word, nothing sent, no file
        left."""
        rnd = random.Random(43)
        big = json.dumps({"inputs": [
            {"name": "A", "datatype": "FP64", "shape": [200000],
             "data": values("FP64", 200000, rnd)}]}).encode()
        head = json.dumps({"inputs": [
            {"name": "A", "datatype": "FP32", "shape": [20000],
             "data": values("FP32", 20000, rnd)}]}).encode()
        late = head[:-2] + (b',{"name":"Z","datatype":"FP32","shape":[3],'
                            b'"data":[1,2]}]}')
        for a, b, body, status, words in (
                ("fsmall", "msmall", big, 413, "oip_grpc_max_message"),
                ("files", "memory", late, 400, "'Z'")):
            got = self.post(a, body)
            want = self.post(b, body)
            self.assertJSONError(got[:3], status, words)
            self.assertEqual((got[3], want[3]), (None, None))
            self.assertEqual((got[4], want[4]), (True, False))
            self.assertEqual(got[2], want[2])
            self.assertEqual(files_left(self.ngx), 0)

    def test_deadline(self):
        """What is left of the client's timeout is written into the
        message's part in memory, raw contents or typed."""
        rnd = random.Random(44)
        body = json.dumps({"parameters": {"timeout": 60000000},
                           "inputs": [
            {"name": "A", "datatype": "FP32", "shape": [30000],
             "data": values("FP32", 30000, rnd)}]}).encode()
        for path, carrier in (("files", "raw"), ("ftyped", "typed")):
            st, _, out, _, mapped = self.post(path, body)
            self.assertEqual((st, mapped), (200, True), out[:300])
            got = self.rt.received()[-1]
            self.assertEqual(got["inputs"][0]["carrier"], carrier)
            left = got["parameters"]["timeout"]
            self.assertEqual(left["kind"], "int64_param")
            self.assertLess(left["value"], 60000000)
            self.assertGreater(left["value"], 30000000)
        self.assertEqual(files_left(self.ngx), 0)

    def test_typed(self):
        """Typed contents through files, byte for byte memory's: every
        datatype gRPC types, the integers' varints measured before they
        are written (negatives take ten bytes), BYTES a field each;
        binary chunks typed from where they lie; a gzip body; in a
        thread; FP16, which has no typed field, refused as in memory."""
        rnd = random.Random(46)
        inputs = [t for t in every_datatype(rnd)
                  if t["datatype"] not in ("FP16", "BF16")]
        body = json.dumps({"id": "typed", "parameters": {"k": "v"},
                           "inputs": inputs,
                           "outputs": [{"name": "IN_INT8"},
                                       {"name": "IN_BYTES"}]}).encode()
        start = self.log_size()
        self.same("ftyped", "mtyped", body)
        self.assertIn("converted in a thread", self.log_since(start))
        got = self.rt.received()[-2]
        self.assertEqual({i["carrier"] for i in got["inputs"]}, {"typed"})
        ins = mixed_inputs(rnd)
        body, hdrs = binary_request([i for i in ins if i[1] != "FP16"])
        self.same("ftyped", "mtyped", body, hdrs)
        self.same("ftyped", "mtyped", gzip.compress(body),
                  dict(hdrs, **{"Content-Encoding": "gzip"}))
        body, hdrs = binary_request(ins)
        got = self.post("ftyped", body, hdrs)
        want = self.post("mtyped", body, hdrs)
        self.assertJSONError(got[:3], 400, "no typed contents field")
        self.assertEqual((got[2], got[3], got[4]), (want[2], None, True))
        self.assertEqual(files_left(self.ngx), 0)

    def test_stream(self):
        """ModelStreamInfer's request through files: the same events."""
        rnd = random.Random(45)
        body = json.dumps({"inputs": [
            {"name": "A", "datatype": "INT16", "shape": [60000],
             "data": values("INT16", 60000, rnd)}]}).encode()
        got, want = [self.post(p, body, call="infer_stream")
                     for p in ("files", "memory")]
        self.assertEqual((got[0], got[4], want[4]), (200, True, False),
                         got[2][:300])
        self.assertIn(b"data: ", got[2])
        self.assertEqual(got[2], want[2])
        self.assertEqual(files_left(self.ngx), 0)


class DiskFull(GatewayTestCase):
    """The converted body's file, or an answer's, cannot be written: a
    small tmpfs where the test may mount one (root); elsewhere the tests
    are skipped, and say so."""

    @classmethod
    def setUpGateway(cls):
        cls.mnt = tempfile.mkdtemp(prefix="spool-full-")
        os.chmod(cls.mnt, 0o777)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o",
                            "size=2600k,mode=0777", "tmpfs", cls.mnt],
                           capture_output=True)
        cls.mounted = (r.returncode == 0)
        if not cls.mounted:
            os.rmdir(cls.mnt)
            return
        cls._stoppers.append(cls.unmount)
        cls.rec = cls.start_recorder()
        server = location("full", "rec", "64k", "binary",
                          "client_body_temp_path %s;\n"
                          "            client_max_body_size 8m;" % cls.mnt)
        # nginx's own buffering kept off the small disk
        server += location("afull", "rec", "64k", "keep",
                           "oip_upstream_outputs json;\n"
                           "            proxy_temp_path %s;\n"
                           "            proxy_max_temp_file_size 0;"
                           % cls.mnt)
        # gRPC's typed contents: the head file and the converted one there
        server += """
        location /gfull/ {{
            oip on;
            oip_upstream_protocol grpc;
            oip_grpc_contents typed;
            oip_grpc_max_message 64m;
            oip_buffer 64k;
            client_body_buffer_size 16k;
            client_body_temp_path %s;
            client_max_body_size 8m;
            rewrite ^/gfull(/.*)$ $1 break;
            grpc_pass grpc://127.0.0.1:{grpc};
        }}
""" % cls.mnt
        grpc_port, cls.grpc = grpc_drop_server()
        cls._stoppers.append(lambda: cls.grpc.stop(None))
        cls.ngx = cls.start_nginx(server, rec=cls.rec.port, grpc=grpc_port)

    @classmethod
    def unmount(cls):
        subprocess.run(["umount", cls.mnt])
        os.rmdir(cls.mnt)

    def test_disk_full(self):
        """A 1.9 MB body fills most of 2.5 MB; its 1 MB of INT8 does not
        fit: a JSON 500, nothing sent, the files gone; then a body that
        fits passes."""
        if not self.mounted:
            self.skipTest("no tmpfs can be mounted here (not root)")
        n = 1000000
        body = (b'{"inputs":[{"name":"I","datatype":"INT8","shape":[%d],'
                b'"data":[' % n + b",".join([b"1"] * n) + b"]}]}")
        resp = self.ngx.post("/full/v2/models/m/infer", body)
        self.assertJSONError(resp, 500, "temporary file")
        self.assertEqual(self.rec.requests, [])
        self.assertEqual(files_left(self.ngx), 0)
        small = (b'{"inputs":[{"name":"I","datatype":"INT8","shape":'
                 b'[100000],"data":[' + b",".join([b"1"] * 100000)
                 + b"]}]}")
        st, _, out = self.ngx.post("/full/v2/models/m/infer", small)
        self.assertEqual(st, 200, out)
        self.assertEqual(len(self.rec.last()["body"]) - int(
            self.rec.last()["headers"][IHCL.lower()]), 100000)
        self.assertIn("writing the converted request", self.ngx.log())


    def test_disk_full_typed(self):
        """gRPC's typed contents: a 1.8 MB body's INT8 fit in the head
        file, their varints (ten bytes for -1: 6 MB) not in the converted
        one: a JSON 500, nothing sent, the files gone; then a body that
        fits passes."""
        if not self.mounted:
            self.skipTest("no tmpfs can be mounted here (not root)")
        big, small = [(b'{"inputs":[{"name":"I","datatype":"INT8",'
                       b'"shape":[%d],"data":[' % n
                       + b",".join([b"-1"] * n) + b"]}]}")
                      for n in (600000, 100000)]
        resp = self.ngx.post("/gfull/v2/models/m/infer", big)
        self.assertJSONError(resp, 500, "temporary file")
        self.assertEqual(self.grpc.calls, [])
        self.assertEqual(files_left(self.ngx), 0)
        st, _, out = self.ngx.post("/gfull/v2/models/m/infer", small)
        self.assertEqual(st, 200, out)
        # 100,000 varints of ten bytes, and the rest of the message
        self.assertEqual(len(self.grpc.calls), 1)
        self.assertGreater(self.grpc.calls[0], 1000000)
        self.assertEqual(files_left(self.ngx), 0)

    def test_disk_full_answer(self):
        """An answer that does not fit on the disk (3 MB), and one that
        fits (2.25 MB) but whose converted tensors do not: each a JSON
        500; then one that fits passes.  Nothing is left on the disk."""
        if not self.mounted:
            self.skipTest("no tmpfs can be mounted here (not root)")
        req = wish(True)
        # 3 bytes an element: "1, "
        for n, what in ((1000000, "the answer could not be written"),
                        (750000, "the converted answer could not be")):
            body, hdrs = json_answer([("O", "INT8", [1] * n)])
            self.rec.answer = (200, hdrs, body)
            resp = self.ngx.post("/afull/v2/models/m/infer", req)
            self.assertJSONError(resp, 500, what)
            self.assertEqual(files_left(self.ngx), 0)
        body, hdrs = json_answer([("O", "INT8", [1] * 300000)])
        self.rec.answer = (200, hdrs, body)
        st, h, out = self.ngx.post("/afull/v2/models/m/infer", req)
        self.assertEqual(st, 200, out[:200])
        self.assertEqual(len(out) - int(h[IHCL.lower()]), 300000)
        self.assertIn("writing the answer", self.ngx.log())
        self.assertEqual(os.listdir(self.mnt), [])


if __name__ == "__main__":
    run_tests()
