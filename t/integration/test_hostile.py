#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""A catalogue of hostile requests through real nginx: each gets its
expected 400/413/415 with a JSON {"error"} naming the problem, the upstream
is never reached, and the worker is the same process afterwards."""

import gzip
import json
import os
import socket
import struct
import sys
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import GatewayTestCase, IHCL, run_tests
from tensors import dumps


def inp(**kw):
    """One valid input, with fields replaced (None removes one)."""
    base = {"name": "x", "shape": [2], "datatype": "INT32", "data": [1, 2]}
    base.update(kw)
    return {k: v for k, v in base.items() if v is not None}


def req(*inputs, **top):
    doc = {"inputs": list(inputs) or [inp()]}
    doc.update(top)
    return dumps(doc)


def binreq(header, chunk):
    h = dumps(header)
    return h + chunk, {IHCL: str(len(h))}


def bds(name, dt, shape, size):
    return {"name": name, "datatype": dt, "shape": shape,
            "parameters": {"binary_data_size": size}}


def raw_json(s):
    return s.encode() if isinstance(s, str) else s


X = b'{"inputs":[{"name":"x","shape":[1],"datatype":"INT8","data":[1]}]}'
WRAP = '{"inputs":[{"name":"x","shape":[1],"datatype":"%s","data":[%s]}]}'


def num(dt, token):
    return (WRAP % (dt, token)).encode()


def catalogue():
    """(what, body, headers, status, substring in the error)"""
    c = []

    def add(what, body, status, msg, headers=None):
        c.append((what, raw_json(body), headers or {}, status, msg))

    # Inference-Header-Content-Length
    n = len(X)
    for v in ("+%d" % n, "-%d" % n, "0%d" % n, "00", "%d %d" % (n // 10,
              n % 10), "1e2", "0x10", "%dabc" % n, "99999999999999999999",
              "18446744073709551615", "9223372036854775808", "", "\xb9\xb2"):
        add("IHCL %r" % v, X, 400, "Inference-Header-Content-Length",
            {IHCL: v})
    add("IHCL past the body", X, 400, "exceeds the body length",
        {IHCL: str(n + 1)})
    add("IHCL 0 without oip_raw_input", X, 400, "needs oip_raw_input",
        {IHCL: "0"})

    # framing
    add("trailing bytes without IHCL", X + b"\x00\x01", 400,
        "unexpected bytes after the JSON")
    add("a second JSON document", X + b" {}", 400, "unexpected bytes")
    add("bytes after the chunks", X + b"zz", 400, "not claimed",
        {IHCL: str(n)})
    add("empty body", b"", 400, "body is empty")
    add("only white space", b" \r\n\t ", 400, "invalid JSON")

    # JSON syntax
    for what, body in [
            ("unterminated string", '{"inputs":[{"name":"x'),
            ("unterminated object", '{"inputs":[]'),
            ("trailing comma in object", '{"inputs":[],}'),
            ("trailing comma in array", '{"inputs":[1,]}'),
            ("missing colon", '{"inputs" []}'),
            ("single quotes", "{'inputs':[]}"),
            ("a comment", '{"inputs":[] /* c */}'),
            ("unquoted key", '{inputs:[]}'),
            ("invalid escape", '{"a\\x":1}'),
            ("short \\u escape", '{"a\\u12":1}'),
            ("lower-case nan", '{"a":nan}'),
            ("lower-case infinity", '{"a":infinity}'),
            ("-NaN", '{"a":-NaN}'),
            ("True", '{"a":True}'),
            ("bare word", '{"a":yes}'),
            ("control character in a string", '{"a":"b\tc"}'),
            ("NUL byte in a string", b'{"a":"b\x00c"}'),
            ("byte-order mark", b'\xef\xbb\xbf' + X),
            ("a top-level array", "[1]"),
            ("a top-level string", '"inputs"'),
    ]:
        add("JSON: " + what, body, 400, "JSON" if what not in (
            "a top-level array", "a top-level string") else "JSON object")

    # numbers
    for dt, token, msg in [
            ("FP32", "1e999999", "out of range for FP32"),
            ("FP64", "1e999999999999999999", "out of range for FP64"),
            ("FP16", "-1e5", "out of range for FP16"),
            ("INT32", "1e999999", "not an integer"),
            ("UINT8", "-0", "out of range for UINT8"),
            ("UINT64", "-0", "out of range for UINT64"),
            ("INT32", "01", "invalid number"),
            ("INT32", "1.", "invalid number"),
            ("INT32", ".5", "expected a value"),
            ("FP32", "1e", "invalid number"),
            ("FP32", "1e+", "invalid number"),
            ("FP32", "+1", "expected a value"),
            ("FP32", "--1", "invalid number"),
            ("FP32", "1_0", "invalid number"),
            ("FP32", "0x1F", "invalid number"),
            ("INT64", "9" * 10000, "out of range for INT64"),
            ("UINT64", "1" + "0" * 30, "out of range for UINT64"),
            ("FP64", "1" + "0" * 400, "out of range for FP64"),
            ("INT8", "1.0", "not an integer"),
            ("INT8", "1E0", "not an integer"),
            ("INT16", "32768", "out of range for INT16"),
            ("UINT32", "4294967296", "out of range for UINT32"),
            ("BOOL", "1", "expected true or false"),
            ("BOOL", "null", "expected true or false"),
            ("BYTES", "7", "expected a string"),
    ]:
        add("number %s %s" % (dt, token[:20]), num(dt, token), 400, msg)

    # strings and UTF-8
    for what, s, msg in [
            ("lone high surrogate", '"\\ud800"', "unpaired high surrogate"),
            ("lone low surrogate", '"\\udc00"', "unpaired low surrogate"),
            ("reversed pair", '"\\ude00\\ud83d"', "unpaired low surrogate"),
            ("high, then not low", '"\\ud83d\\u0041"',
             "unpaired high surrogate"),
            ("high at the end", '"a\\ud83d"', "unpaired high surrogate"),
    ]:
        add("string: " + what, '{"inputs":[{"name":%s}]}' % s, 400, msg)
    for what, b in [
            ("overlong 2-byte", b"\xc0\xaf"),
            ("overlong 3-byte", b"\xe0\x80\xaf"),
            ("overlong 4-byte", b"\xf0\x80\x80\xaf"),
            ("UTF-8 surrogate", b"\xed\xa0\x80"),
            ("beyond U+10FFFF", b"\xf4\x90\x80\x80"),
            ("5-byte form", b"\xf8\x88\x80\x80\x80"),
            ("lone continuation", b"\x80"),
            ("truncated sequence", b"\xe2\x82"),
            ("0xFF", b"\xff"),
    ]:
        add("UTF-8: " + what, b'{"inputs":[{"name":"a' + b + b'"}]}', 400,
            "invalid UTF-8")
    add("NUL in an input name", req(inp(name="a\u0000b")), 400,
        "control characters")
    add("newline in an output name", req(outputs=[{"name": "o\n"}]), 400,
        "control characters")

    # duplicate keys at every level
    for what, body in [
            ("top level", '{"inputs":[],"inputs":[]}'),
            ("top level, escaped", '{"id":"a","\\u0069d":"b","inputs":[]}'),
            ("input", '{"inputs":[{"name":"x","name":"y"}]}'),
            ("input parameters",
             '{"inputs":[{"name":"x","parameters":{"a":1,"a":2}}]}'),
            ("request parameters", '{"parameters":{"p":1,"p":1},'
             '"inputs":[]}'),
            ("output", '{"outputs":[{"name":"o","name":"o"}],"inputs":[]}'),
            ("output parameters", '{"outputs":[{"name":"o","parameters":'
             '{"binary_data":true,"binary_data":false}}],"inputs":[]}'),
            ("deep in an unknown field",
             '{"x":[{"y":{"z":[{"k":1,"k":2}]}}],"inputs":[]}'),
            ("same key, other escapes",
             '{"x":{"\\u00e9":1,"\\u00E9":2},"inputs":[]}'),
            ("same key, raw and escaped",
             b'{"x":{"\xc3\xa9":1,"\\u00e9":2},"inputs":[]}'),
    ]:
        add("duplicate key: " + what, body, 400, "duplicate key")

    # inputs and their fields
    for what, body, msg in [
            ("no inputs", dumps({"id": "a"}), "'inputs' is missing"),
            ("inputs not an array", dumps({"inputs": {}}),
             "must be an array"),
            ("inputs empty", dumps({"inputs": []}), "must not be empty"),
            ("an input not an object", dumps({"inputs": [1]}),
             "must be an object"),
            ("name missing", req(inp(name=None)), "'name' is missing"),
            ("name empty", req(inp(name="")), "must not be empty"),
            ("name not a string", req(inp(name=1)), "must be a string"),
            ("names twice", req(inp(), inp()), "appears twice"),
            ("names twice, escaped", b'{"inputs":[' + dumps(inp()) + b','
             + dumps(inp(name="X"))[:-1].replace(b'"X"', b'"\\u0078"')
             + b'}]}', "appears twice"),
            ("datatype missing", req(inp(datatype=None)),
             "'datatype' is missing"),
            ("datatype unknown", req(inp(datatype="FLOAT")),
             "unknown datatype"),
            ("datatype lower case", req(inp(datatype="int32")),
             "unknown datatype"),
            ("datatype not a string", req(inp(datatype=5)),
             "must be a string"),
            ("shape missing", req(inp(shape=None)), "'shape' is missing"),
            ("shape not an array", req(inp(shape=2)), "must be an array"),
            ("shape negative", req(inp(shape=[-1])), "shape dimension"),
            ("shape float", req(inp(shape=[2.0])), "shape dimension"),
            ("shape string", req(inp(shape=["2"])), "array of integers"),
            ("shape 2^63", req(inp(shape=[2 ** 63])), "shape dimension"),
            ("shape product overflows", req(inp(shape=[2 ** 32, 2 ** 32])),
             "overflows"),
            ("shape product overflows, three dims",
             req(inp(shape=[2 ** 21, 2 ** 21, 2 ** 21])), "overflows"),
            ("no data at all", req(inp(data=None)), "has no data"),
            ("data and binary_data_size",
             req(inp(parameters={"binary_data_size": 8})),
             "more than one of"),
            ("data and shared memory",
             req(inp(parameters={"shared_memory_region": "r"})),
             "more than one of"),
            ("data too short", req(inp(data=[1])), "data has 1 elements"),
            ("data too long", req(inp(data=[1, 2, 3])),
             "data has 3 elements"),
            ("data ragged", req(inp(shape=[2, 2], data=[[1, 2], [3]])),
             "not nested"),
            ("data nested too deep", req(inp(shape=[2], data=[[1], [2]])),
             "not nested"),
            ("data not an array", req(inp(data=1)), "must be an array"),
            ("data of objects", req(inp(data=[{}, {}])),
             "expected a number"),
            ("parameters not an object", req(inp(data=None,
                                                 parameters=[1])),
             "'parameters' must be an object"),
    ]:
        add("input: " + what, body, 400, msg)

    # outputs and parameters
    for what, body, msg in [
            ("outputs not an array", req(outputs={}), "must be an array"),
            ("output not an object", req(outputs=["o"]),
             "must be an object"),
            ("output name missing", req(outputs=[{}]), "'name' is missing"),
            ("output names twice", req(outputs=[{"name": "o"},
                                                {"name": "o"}]),
             "appears twice"),
            ("binary_data a string", req(outputs=[{
                "name": "o", "parameters": {"binary_data": "true"}}]),
             "must be a boolean"),
            ("binary_data_output a number",
             req(parameters={"binary_data_output": 1}), "must be a boolean"),
            ("parameter an object", req(parameters={"p": {}}),
             "string, number or boolean"),
            ("parameter an array", req(outputs=[{
                "name": "o", "parameters": {"p": [1]}}]),
             "string, number or boolean"),
            ("parameter null", req(parameters={"p": None}),
             "string, number or boolean"),
    ]:
        add("outputs: " + what, body, 400, msg)

    # binary data
    b, h = binreq({"inputs": [bds("x", "INT32", [2], -1)]}, b"")
    add("binary_data_size negative", b, 400, "non-negative integer", h)
    b, h = binreq({"inputs": [bds("x", "INT32", [2], 8.0)]}, b"\0" * 8)
    add("binary_data_size float", b, 400, "non-negative integer", h)
    b, h = binreq({"inputs": [bds("x", "INT32", [2], "8")]}, b"\0" * 8)
    add("binary_data_size string", b, 400, "non-negative integer", h)
    b, h = binreq({"inputs": [bds("x", "INT32", [2], 2 ** 64)]}, b"")
    add("binary_data_size 2^64", b, 400, "non-negative integer", h)
    b, h = binreq({"inputs": [bds("a", "BYTES", [1], 2 ** 63),
                              bds("b", "BYTES", [1], 2 ** 63 + 5)]},
                  b"\1\0\0\0a")
    add("binary_data_size sum overflows 64 bits", b, 400, "runs past", h)
    b, h = binreq({"inputs": [bds("x", "INT64", [2 ** 61], 0)]}, b"")
    add("shape x size overflows 64 bits", b, 400, "need more than", h)
    b, h = binreq({"inputs": [bds("x", "FP64", [8 * 1024 ** 3],
                                  64 * 1024 ** 3)]}, b"")
    add("64 GB binary_data_size", b, 400, "runs past", h)
    b, h = binreq({"inputs": [bds("x", "INT32", [2], 8)]}, b"\0" * 4)
    add("chunk shorter than binary_data_size", b, 400, "runs past", h)
    b, h = binreq({"inputs": [bds("x", "INT32", [2], 4)]}, b"\0" * 4)
    add("binary_data_size not shape x size", b, 400, "need 8", h)
    b, h = binreq({"inputs": [bds("x", "BYTES", [2], 9)]},
                  b"\1\0\0\0a\x05\0\0\0")
    add("BYTES length overruns", b, 400, "runs past the binary data", h)
    b, h = binreq({"inputs": [bds("x", "BYTES", [2], 7),
                              bds("y", "UINT8", [1], 1)]},
                  b"\1\0\0\0a\2\0" + b"\0\7")
    add("BYTES length split across chunks", b, 400, "is cut off", h)
    b, h = binreq({"inputs": [bds("x", "BYTES", [1], 7)]},
                  b"\1\0\0\0abc")
    add("BYTES trailing bytes", b, 400, "bytes after its 1 elements", h)
    b, h = binreq({"inputs": [bds("x", "BYTES", [3], 4)]}, b"\0\0\0\0")
    add("BYTES too few elements", b, 400, "is cut off", h)
    b, h = binreq({"inputs": [bds("x", "BOOL", [3], 3)]}, b"\1\0\2")
    add("BOOL byte 2", b, 400, "BOOL element 2 is 2", h)
    b, _ = binreq({"inputs": [bds("x", "UINT8", [1], 1)]}, b"\1")
    add("binary_data_size without IHCL", b, 400,
        "unexpected bytes after the JSON")

    # limits and sheer size
    deep = b'{"inputs":[{"name":"x","shape":[1],"datatype":"INT8",' \
           b'"data":[1],"p":' + b"[" * 100000 + b"]" * 100000 + b"}]}"
    add("nesting 10^5 deep", deep, 400, "oip_max_depth")
    deep_obj = b'{"x":' + b'{"a":' * 150 + b"1" + b"}" * 150 + b',"inputs":[]}'
    add("objects 150 deep", deep_obj, 400, "oip_max_depth")
    tiny = b'{"inputs":[' + b",".join(
        b'{"name":"i%d","shape":[0],"datatype":"INT8","data":[]}' % i
        for i in range(1000000)) + b"]}"
    add("10^6 tiny inputs", tiny, 413, "more than 65536 inputs")
    many_out = req(outputs=[{"name": "o%d" % i} for i in range(70000)])
    add("70000 outputs listed", many_out, 413, "more than 65536 outputs")
    many_keys = b'{"x":{' + b",".join(b'"k%d":0' % i
                                      for i in range(60000)) + \
        b',"k7":1},"inputs":[]}'
    add("60000 keys and one duplicate", many_keys, 400,
        "duplicate key \"k7\"")
    too_many = b'{"x":{' + b",".join(b'"k%d":0' % i
                                     for i in range(200000)) + b'},"inputs":[]}'
    add("an object of 200000 members", too_many, 413,
        "more than 65536 members")
    add("tensor over oip_max_tensor_size",
        req(inp(datatype="FP64", shape=[10 ** 7], data=[1])), 413,
        "oip_max_tensor_size")
    add("shape of 10^12 elements",
        req(inp(datatype="FP64", shape=[10 ** 12], data=[1])), 413,
        "oip_max_tensor_size")

    # encodings
    add("Content-Encoding br", X, 415, "Content-Encoding",
        {"Content-Encoding": "br"})
    add("Content-Encoding twice", X, 415, "Content-Encoding",
        {"Content-Encoding": "gzip, deflate"})
    add("gzip that is not", X, 400, "cannot be decompressed",
        {"Content-Encoding": "gzip"})
    add("gzip cut short", gzip.compress(X)[:-10], 400, "cut short",
        {"Content-Encoding": "gzip"})
    add("raw deflate", zlib.compress(X)[2:-4], 400, "cannot be decompressed",
        {"Content-Encoding": "deflate"})
    add("gzip then junk", gzip.compress(X) + b"junk", 400, "follow the end",
        {"Content-Encoding": "gzip"})
    add("gzip bomb", gzip.compress(b" " * (130 * 1024 * 1024)), 413,
        "decompressed body exceeds", {"Content-Encoding": "gzip"})

    return c


class Hostile(GatewayTestCase):

    @classmethod
    def setUpGateway(cls):
        cls.rec = cls.start_recorder()
        cls.ngx = cls.start_nginx("""
            client_max_body_size 200m;
            client_body_buffer_size 1m;

            location / {{
                oip on;
                oip_upstream_inputs binary;
                oip_upstream_outputs binary;
                proxy_pass http://127.0.0.1:{rec};
            }}
            location /small/ {{
                client_max_body_size 1k;
                oip on;
                proxy_pass http://127.0.0.1:{rec}/;
            }}
            location /raw/ {{
                oip on;
                oip_raw_input IMAGE UINT8 -1,3;
                proxy_pass http://127.0.0.1:{rec}/;
            }}
            location /raw-fixed/ {{
                oip on;
                oip_raw_input V INT16 2,2;
                proxy_pass http://127.0.0.1:{rec}/;
            }}
        """, rec=cls.rec.port)

    def setUp(self):
        self.rec.clear()
        self.workers = self.ngx.workers()
        self.assertEqual(len(self.workers), 1)

    def tearDown(self):
        self.assertEqual(self.ngx.workers(), self.workers,
                         "the worker changed: it died")

    def expect(self, path, what, body, headers, status, msg):
        resp = self.ngx.post(path, body, headers, timeout=60)
        self.assertJSONError(resp, status, msg)
        self.assertIsNone(self.rec.last(), "%s: the upstream was reached"
                          % what)

    def test_catalogue(self):
        cases = catalogue()
        self.assertGreaterEqual(len(cases), 100)
        for what, body, headers, status, msg in cases:
            with self.subTest(what=what):
                self.rec.clear()
                self.expect("/v2/models/m/infer", what, body, headers,
                            status, msg)
                self.assertEqual(self.ngx.workers(), self.workers, what)

    def test_raw_bodies(self):
        for path, body, msg in [
                ("/raw/", bytes(13), "not a whole number"),
                ("/raw/", bytes(4), "not a whole number"),
                ("/raw-fixed/", bytes(6), "needs 8"),
                ("/raw-fixed/", bytes(10), "needs 8")]:
            with self.subTest(path=path, size=len(body)):
                self.rec.clear()
                self.expect(path + "v2/models/m/infer", path, body,
                            {IHCL: "0"}, 400, msg)

    def test_over_client_max_body_size(self):
        body = req(inp(datatype="UINT8", shape=[2000], data=[1] * 2000))
        self.expect("/small/v2/models/m/infer", "large", body, {}, 413,
                    "client_max_body_size")
        st, out = self.ngx.curl("-X", "POST", "--data-binary", "@-",
                                "-H", "Transfer-Encoding: chunked",
                                "{base}/small/v2/models/m/infer", data=body)
        self.assertEqual(st, 413)
        self.assertIn("client_max_body_size", json.loads(out)["error"])
        self.assertIsNone(self.rec.last())

    def test_bad_chunked_framing(self):
        s = socket.create_connection(("127.0.0.1", self.ngx.port))
        s.sendall(b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\nZZ\r\nab\r\n0\r\n\r\n")
        data = b""
        s.settimeout(10)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        head, _, body = data.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 400"), head)
        self.assertIn(b"application/json", head)
        self.assertIn("could not be read", json.loads(body)["error"])
        self.assertIsNone(self.rec.last())

    def test_client_closes_early(self):
        # Content-Length promises more than comes: nginx waits, the client
        # goes; nothing reaches the upstream and the worker carries on
        for sent in (0, 10, len(X) - 1):
            s = socket.create_connection(("127.0.0.1", self.ngx.port))
            s.sendall(b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Length: %d\r\n\r\n" % (len(X) + 100)
                      + X[:sent])
            time.sleep(0.05)
            s.close()
        time.sleep(0.3)
        self.assertIsNone(self.rec.last())
        st, _, _ = self.ngx.post("/v2/models/m/infer", X)
        self.assertEqual(st, 200)

    def test_valid_request_after_the_catalogue_still_converts(self):
        st, _, out = self.ngx.post("/v2/models/m/infer", X)
        self.assertEqual(st, 200, out)
        up = self.rec.last()
        self.assertEqual(up["headers"][IHCL.lower()],
                         str(len(up["body"]) - 1))


if __name__ == "__main__":
    run_tests()
