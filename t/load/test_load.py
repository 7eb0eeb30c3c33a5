#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""Hardening: a bounded load test with wrk, on the loopback only, against
2 workers in front of the example runtime.

A fixed cycle of requests (t/lib/load.lua sends it): valid conversions of
16 values, 4 KB and 256 KB (FP32, BF16, FP16, INT64, BYTES, mixed
datatypes, a binary request, a gzip body, Triton's simple model, a
connection that closes) between hostile ones (broken JSON, wrong counts,
duplicate keys, bad IHCL and chunk sizes, unknown encodings, a gzip bomb,
requests the runtime refuses).  Each answer is compared with the exact
bytes the client must get: those are taken once through the gateway
before the load, after checking their values independently with
tensors.py.  Hostile requests must get their 4xx and {"error": ...}.

Phases: a warm-up that sends every request on both workers, the workers'
RSS, the main phase, the RSS again.  No worker may die (same PIDs, and the
harness checks the error log), no answer may be wrong or missing, and the
RSS may not grow by 5% or more, per worker and in total.

The workers run with glibc's malloc thresholds fixed (MALLOC_TUNABLES):
with its default, dynamic ones, a worker's idle RSS swings by about 3 MB
up and down between runs (the freed buffers of the last large request are
kept or trimmed by chance), which hides any leak and makes a 5% bound
a coin toss.  With them, freed buffers go back to the kernel and idle RSS
is what the worker still holds.  OIP_LOAD_MALLOC=default runs with
glibc's defaults and only reports the RSS, as do sanitizer runs; under a
wrapper (valgrind, one process) the test is skipped.

Each phase is bounded by a duration and a request count (wrk's -d; each
thread stops after MAX_RATE x seconds / threads answers).  The default run
takes about 15 s.  OIP_SOAK_SECONDS=600 (`./build.sh soak`) makes the
main phase that long, run in segments of OIP_SOAK_SEGMENT seconds (60)
with the RSS read after each, so that a leak shows as a steady climb.
OIP_LOAD_THREADS sets wrk's threads, one connection each (2).  A summary
goes to stderr:

    OIP-LOAD-SUMMARY requests=... req/s=... rss_kb_before=...
    rss_kb_after=... growth=...%
"""

import gzip
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import (GatewayTestCase, IHCL, MODULE, NGINX_ENV, NGINX_WRAP,
                     ROOT, SINGLE, binary_body, run_tests, split_binary)
from tensors import bits, pack

WRK = shutil.which("wrk") or "/usr/bin/wrk"
LOAD_LUA = os.path.join(ROOT, "t", "lib", "load.lua")


def env_int(name, default):
    return int(os.environ.get(name, "") or default)


SOAK = env_int("OIP_SOAK_SECONDS", 0)
SEGMENT = env_int("OIP_SOAK_SEGMENT", 60)
THREADS = env_int("OIP_LOAD_THREADS", 2)
WARMUP_SECONDS = 20 if SOAK else 4
MAIN_SECONDS = SOAK or 8
# the request bound: far above what the example runtime serves (a few
# hundred a second here), so that the duration ends a phase
MAX_RATE = env_int("OIP_LOAD_MAX_RATE", 2000)
RSS_GROWTH_LIMIT = 5.0      # percent

MALLOC_DEFAULT = os.environ.get("OIP_LOAD_MALLOC", "") == "default"
MALLOC_TUNABLES = ("glibc.malloc.mmap_threshold=131072:"
                   "glibc.malloc.trim_threshold=131072")
# RSS says nothing under a sanitizer
RSS_MEANINGFUL = not (MALLOC_DEFAULT or "LD_PRELOAD" in NGINX_ENV)

MODEL = "/v2/models/identity/infer"


# ------------------------------------------------------------ the cases


class Case:
    """One request of the cycle.  check(test, headers, body) checks a
    valid answer's values independently of the module."""

    def __init__(self, kind, name, body, path=MODEL, headers=None,
                 status=200, check=None, id=None, contains=None):
        self.kind, self.name, self.body, self.path = kind, name, body, path
        self.headers = headers or {}
        self.status, self.check, self.id = status, check, id
        self.contains = contains
        self.answer = None          # (status, headers, body), precomputed


def outputs_of(test, headers, body, want_binary):
    """The outputs of an answer, by name: (output dict, chunk or None)."""
    if want_binary:
        test.assertEqual(headers.get("content-type"),
                         "application/octet-stream")
        doc, rest = split_binary(headers, body)
    else:
        test.assertEqual(headers.get("content-type"), "application/json")
        test.assertNotIn(IHCL.lower(), headers)
        doc, rest = json.loads(body), b""
    out, pos = {}, 0
    for o in doc["outputs"]:
        size = (o.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            out[o["name"]] = (o, rest[pos:pos + size])
            pos += size
        else:
            test.assertNotIn("parameters", o)
            out[o["name"]] = (o, None)
    test.assertEqual(pos, len(rest))
    return doc, out


def identity_check(id, inputs, binary=()):
    """A checker for the identity model: INPUTn comes back as OUTPUTn
    with the same bits; the outputs named in binary come as chunks."""

    def check(test, headers, body):
        doc, outs = outputs_of(test, headers, body, bool(binary))
        test.assertEqual(doc["id"], id)
        test.assertEqual(doc["model_name"], "identity")
        test.assertEqual(len(outs), len(inputs))
        for name, dt, shape, values in inputs:
            oname = name.replace("INPUT", "OUTPUT", 1)
            o, chunk = outs[oname]
            test.assertEqual((o["datatype"], o["shape"]), (dt, shape))
            if oname in binary:
                test.assertEqual(chunk, pack(dt, values), oname)
            else:
                test.assertIsNone(chunk)
                got = o["data"]
                if dt == "BYTES":
                    test.assertEqual(got, values, oname)
                else:
                    test.assertEqual(bits(dt, got), pack(dt, values), oname)
    return check


def json_infer(id, inputs, outputs=None, params=None):
    req = {"id": id, "inputs": [
        {"name": n, "shape": s, "datatype": dt, "data": v}
        for n, dt, s, v in inputs]}
    if outputs is not None:
        req["outputs"] = outputs
    if params is not None:
        req["parameters"] = params
    return json.dumps(req, separators=(",", ":")).encode()


def lcg(n, seed, modulus):
    x = seed
    for _ in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) % 2 ** 64
        yield (x >> 20) % modulus


def valid_cases():
    cases = []

    def add(name, inputs, binary=(), headers=None, body=None, path=MODEL,
            check=None, outputs=None, params=None):
        id = "load-%s" % name
        if body is None:
            if binary:
                # every output listed: the listed ones only come back
                outputs = [
                    {"name": n.replace("INPUT", "OUTPUT", 1),
                     "parameters": {"binary_data": n.replace(
                         "INPUT", "OUTPUT", 1) in binary}}
                    for n, _, _, _ in inputs]
            body = json_infer(id, inputs, outputs, params)
        cases.append(Case("valid", name, body, path=path, headers=headers,
                          id=id, check=check or identity_check(
                              id, inputs, binary)))

    # 16 values
    add("fp32-16", [("INPUT0", "FP32", [2, 8],
                     [0.1, -0.0, 1e-45, 3.4028234663852886e38, 16777217.0,
                      -1.5, 2.5, 1 / 3, 1e-3, 123456.789, -7.0, 0.0, 42.0,
                      6.5e-39, -3.25, 100.0])])
    add("bf16-16", [("INPUT0", "BF16", [16],
                     [1.0, -2.0, 1.015625, 0.5, 3.0e38, -0.0, 0.0, 7.0,
                      1e-3, 65280.0, 2.0 ** -100, -1.0, 0.25, 100.0, 3.0,
                      1024.0])])
    # 4 KB
    add("int64-4k", [("INPUT0", "INT64", [8, 64],
                      [-2 ** 63, 2 ** 63 - 1, 0, -1] +
                      [v - 2 ** 40 for v in lcg(508, 1, 2 ** 41)])])
    add("fp16-4k", [("INPUT0", "FP16", [2048],
                     [1.0, -2.0, 65504.0, 6e-08, 0.0, -0.0, math.inf,
                      -math.inf, 0.1, 1 / 3] +
                     [(v - 30000) / 7.0 for v in lcg(2038, 2, 60000)])])
    words = ["h\u00e9llo", "\u0000a", "", "\U0001f600", "\"\\", "tab\t",
             "load", "\u4e2d\u6587", "x" * 100]
    strings = [words[i % len(words)] + str(i) for i in range(256)]
    add("bytes-4k", [("INPUT0", "BYTES", [256], strings)])
    # 256 KB of tensor data; one comes back binary
    add("fp32-256k", [("INPUT0", "FP32", [256, 256],
                       [(v - 2 ** 23) / 1024.0
                        for v in lcg(65536, 3, 2 ** 24)])],
        binary=("OUTPUT0",))
    add("int64-256k", [("INPUT0", "INT64", [32768],
                        [v - 2 ** 52 for v in lcg(32768, 4, 2 ** 53)])])
    add("fp16-256k", [("INPUT0", "FP16", [131072],
                       [(v - 1000) / 8.0 for v in lcg(131072, 5, 2000)])])
    # several inputs, output forms mixed
    add("mixed", [("INPUT0", "INT8", [4], [-128, 127, 0, 5]),
                  ("INPUT1", "BOOL", [3], [True, False, True]),
                  ("INPUT2", "UINT64", [2], [0, 2 ** 64 - 1]),
                  ("INPUT3", "FP64", [2], [0.1, 5e-324])],
        binary=("OUTPUT1", "OUTPUT3"))

    # a binary request: one output asked binary, one JSON
    a = struct.pack("<16i", *range(-8, 8))
    b = pack("FP64", [0.1, -1e300, 2.5, math.inf])
    id = "load-binary"
    body, n = binary_body({"id": id, "inputs": [
        {"name": "INPUT0", "shape": [4, 4], "datatype": "INT32",
         "parameters": {"binary_data_size": len(a)}},
        {"name": "INPUT1", "shape": [4], "datatype": "FP64",
         "parameters": {"binary_data_size": len(b)}}],
        "outputs": [{"name": "OUTPUT0",
                     "parameters": {"binary_data": True}},
                    {"name": "OUTPUT1"}]}, [a, b])
    add("binary", [("INPUT0", "INT32", [4, 4], list(range(-8, 8))),
                   ("INPUT1", "FP64", [4], [0.1, -1e300, 2.5, math.inf])],
        binary=("OUTPUT0",), body=body,
        headers={IHCL: str(n), "Content-Type": "application/octet-stream"})

    # gzip
    vals = [v - 32768 for v in lcg(100, 6, 65536)]
    add("gzip", [("INPUT0", "INT16", [100], vals)],
        headers={"Content-Encoding": "gzip"},
        body=gzip.compress(json_infer("load-gzip",
                                      [("INPUT0", "INT16", [100], vals)]),
                           mtime=0))

    # Triton's simple model, with a version, and a connection that closes
    x = list(range(16))
    y = [v * -3 + 2 ** 31 - 100 for v in range(16)]

    def simple_check(id):
        def check(test, headers, body):
            doc, outs = outputs_of(test, headers, body, False)
            test.assertEqual(doc["id"], id)
            wrap = lambda v: ((v + 2 ** 31) % 2 ** 32) - 2 ** 31
            test.assertEqual(outs["OUTPUT0"][0]["data"],
                             [wrap(p + q) for p, q in zip(x, y)])
            test.assertEqual(outs["OUTPUT1"][0]["data"],
                             [wrap(p - q) for p, q in zip(x, y)])
        return check

    for name, headers in (("simple", None),
                          ("simple-close", {"Connection": "close"})):
        add(name, [("INPUT0", "INT32", [1, 16], x),
                   ("INPUT1", "INT32", [1, 16], y)],
            path="/v2/models/simple/versions/1/infer", headers=headers,
            check=simple_check("load-" + name))
    return cases


def hostile_cases():
    cases = []

    def add(name, body, status=400, headers=None, path=MODEL,
            contains=None):
        cases.append(Case("hostile", name, body, path=path, status=status,
                          headers=headers, contains=contains))

    def infer(dims, dt, data, name="INPUT0"):
        return ('{"name":"%s","shape":[%s],"datatype":"%s","data":%s}'
                % (name, dims, dt, data))

    def one(dims, dt, data, tail=""):
        return ('{"inputs":[%s]}%s' % (infer(dims, dt, data), tail)).encode()

    add("bad-json", b'{"inputs":[{"name":"INPUT0","shape":[2],"datatype":'
        b'"FP32","data":[1.0,')
    add("trailing", one("1", "FP32", "[1]", " x"))
    add("count", one("4", "INT32", "[1,2,3]"), contains="INPUT0")
    add("dup-key", ('{"inputs":[%s],"inputs":[%s]}'
                    % (infer("1", "INT32", "[1]"),
                       infer("1", "INT32", "[2]"))).encode())
    add("range", one("2", "INT8", "[1,300]"), contains="INPUT0")
    add("nan-int", one("1", "INT32", "[NaN]"), contains="INPUT0")
    add("dtype", one("1", "FP128", "[1]"), contains="INPUT0")
    add("neg-shape", one("-1", "FP32", "[1]"), contains="INPUT0")
    add("deep", one("1", "FP32", "[" * 150 + "1" + "]" * 150))
    add("huge-shape", one("1000000000000", "FP32", "[1]"), status=413)
    add("bytes-number", one("1", "BYTES", "[1]"), contains="INPUT0")
    add("bad-utf8", b'{"id":"\xff\xfe","inputs":[]}')

    # binary framing
    chunk = struct.pack("<4f", 1, 2, 3, 4)
    hdr = {"inputs": [{"name": "INPUT0", "shape": [4], "datatype": "FP32",
                       "parameters": {"binary_data_size": 16}}]}
    body, n = binary_body(hdr, [chunk])
    add("ihcl-text", body, headers={IHCL: "abc"})
    add("ihcl-past-end", body, headers={IHCL: str(len(body) + 10)})
    add("chunk-short", body[:-4], headers={IHCL: str(n)})
    add("chunk-long", body + b"xxxx", headers={IHCL: str(n)})
    bad = struct.pack("<I", 1000) + b"abc"
    body, n = binary_body({"inputs": [
        {"name": "INPUT0", "shape": [1], "datatype": "BYTES",
         "parameters": {"binary_data_size": len(bad)}}]}, [bad])
    add("bytes-prefix", body, headers={IHCL: str(n)}, contains="INPUT0")
    add("raw", b"\0" * 64, headers={IHCL: "0"})

    # compression
    ok = one("1", "INT32", "[1]")
    add("encoding", ok, status=415, headers={"Content-Encoding": "br"})
    add("bad-gzip", b"\x1f\x8b\x08\x00garbage-garbage-garbage",
        headers={"Content-Encoding": "gzip"})
    add("gzip-bomb", gzip.compress(b" " * (10 << 20), mtime=0), status=413,
        headers={"Content-Encoding": "gzip"})

    # well-formed, refused by the runtime: its error passes through
    add("no-model", ok, status=404, path="/v2/models/nosuch/infer")
    add("simple-shape", ('{"inputs":[%s,%s]}'
                         % (infer("8", "INT32", [1] * 8, "INPUT0"),
                            infer("8", "INT32", [1] * 8, "INPUT1"))).encode(),
        path="/v2/models/simple/infer")
    return cases


def interleave(valid, hostile):
    """The cycle: hostile requests spread between the valid ones."""
    out, h = [], list(hostile)
    per = max(1, math.ceil(len(h) / len(valid)))
    for v in valid:
        out.append(v)
        out.extend(h[:per])
        del h[:per]
    return out + h


# ------------------------------------------------------------ the process


def proc_field(pid, name, field):
    """A number from /proc/PID/name, e.g. VmRSS (KB) from status."""
    with open("/proc/%d/%s" % (pid, name)) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s in /proc/%d/%s" % (field, pid, name))


def rss_kb(pid):
    return proc_field(pid, "status", "VmRSS")


def written(pid):
    """Bytes the process wrote through system calls: it served."""
    return proc_field(pid, "io", "wchar")


def module_stamp():
    try:
        st = os.stat(MODULE)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


@unittest.skipIf(NGINX_WRAP or SINGLE, "a load test is for nginx with its "
                 "2 workers at full speed, not under a wrapper such as "
                 "valgrind (the ASan run does take it)")
class Load(GatewayTestCase):

    @classmethod
    def setUpGateway(cls):
        # a failure, not a skip: a hardening test that quietly does not
        # run is worse than none
        if not os.access(WRK, os.X_OK):
            raise RuntimeError("wrk is not installed: apt-get install wrk")
        cls.module = module_stamp()
        cls.rt = cls.start_runtime("triton")
        # the tunables for nginx only: its workers inherit the master's
        # malloc settings
        saved = os.environ.get("GLIBC_TUNABLES")
        if not MALLOC_DEFAULT:
            os.environ["GLIBC_TUNABLES"] = MALLOC_TUNABLES
        try:
            cls.ngx = cls.start_nginx("""
                client_max_body_size 32m;
                client_body_buffer_size 1m;

                location /v2/ {{
                    oip on;
                    oip_upstream_inputs binary;
                    oip_upstream_outputs binary;
                    oip_max_json_size 8m;
                    oip_max_tensor_size 8m;
                    proxy_pass http://127.0.0.1:{rt};
                }}
            """, rt=cls.rt.port, workers=2)
        finally:
            if saved is None:
                os.environ.pop("GLIBC_TUNABLES", None)
            else:
                os.environ["GLIBC_TUNABLES"] = saved
        cls.dir = tempfile.mkdtemp(prefix="oip-load-")
        cls._stoppers.append(lambda: shutil.rmtree(cls.dir, True))

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        except AssertionError as e:
            if getattr(cls, "module", module_stamp()) != module_stamp():
                raise AssertionError("%s\n%s was rewritten during the run: "
                                     "a running nginx crashes when the "
                                     "module it loaded changes under it"
                                     % (e, MODULE)) from None
            raise

    # -- helpers

    def send(self, case):
        headers = dict(case.headers)
        headers.pop("Connection", None)
        return self.ngx.post(case.path, case.body, headers)

    def precompute(self, cases):
        """Sends each case, checks the answer's values independently of
        the module, and keeps its exact bytes; a second send must give
        the same bytes."""
        for case in cases:
            st, headers, body = self.send(case)
            msg = "%s: %d %r" % (case.name, st, body[:300])
            self.assertEqual(st, case.status, msg)
            if case.kind == "valid":
                case.check(self, headers, body)
            else:
                self.assertEqual(headers.get("content-type"),
                                 "application/json", msg)
                self.assertTrue(body.startswith(b'{"error"'), msg)
                doc = json.loads(body)
                self.assertEqual(list(doc), ["error"], msg)
                if case.contains:
                    self.assertIn(case.contains, doc["error"], msg)
            self.assertEqual(self.send(case)[2], body,
                             "%s: the answer is not deterministic"
                             % case.name)
            case.answer = (st, headers, body)

    def write_manifest(self, cases):
        """The cases for load.lua: a manifest and one file a body."""
        lines = []
        for i, c in enumerate(cases):
            st, headers, body = c.answer
            req, ans = "req-%02d" % i, "ans-%02d" % i
            with open(os.path.join(self.dir, req), "wb") as f:
                f.write(c.body)
            with open(os.path.join(self.dir, ans), "wb") as f:
                f.write(body)
            hdrs = ["%s: %s" % kv for kv in c.headers.items()]
            fields = [c.kind, c.name, c.path, str(st), c.id or "-",
                      headers.get("content-type", "-"),
                      headers.get(IHCL.lower(), "-")] + hdrs
            for f in fields:
                self.assertNotRegex(f, "[\t\n|]")
            fields[7:] = ["|".join(hdrs) or "-", req, ans]
            lines.append("\t".join(fields))
        with open(os.path.join(self.dir, "manifest"), "w") as f:
            f.write("\n".join(lines) + "\n")

    def wrk(self, seconds):
        """One bounded wrk run; its counters."""
        env = dict(os.environ, OIP_LOAD_DIR=self.dir,
                   OIP_LOAD_MAX=str(max(1, MAX_RATE * seconds // THREADS)))
        cmd = [WRK, "-t%d" % THREADS, "-c%d" % THREADS, "-d%ds" % seconds,
               "--timeout", "20s", "-s", LOAD_LUA,
               "http://127.0.0.1:%d" % self.ngx.port]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True,
                           errors="replace", timeout=seconds + 120)
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, 0, out)
        m = re.search(r"^OIP-LOAD (.*)$", out, re.M)
        self.assertIsNotNone(m, out)
        res = {k: int(v) for k, v in
               (kv.split("=") for kv in m.group(1).split())}
        m = re.search(r"^OIP-LOAD-CASE (.*)$", out, re.M)
        res["cases"] = {k: int(v) for k, v in
                        (kv.split("=") for kv in m.group(1).split())}
        res["output"] = out
        return res

    def note(self):
        """Why workers may have died without the module being at fault."""
        if module_stamp() != type(self).module:
            return ("\n%s was rewritten during the run: a running nginx "
                    "crashes when the module it loaded changes under it"
                    % MODULE)
        return ""

    def assertClean(self, res, cases, phase):
        msg = "%s:\n%s%s" % (phase, res["output"], self.note())
        for k in ("valid_wrong", "valid_non2xx", "hostile_wrong", "lost",
                  "err_connect", "err_read", "err_write", "err_timeout"):
            self.assertEqual(res[k], 0, "%s=%d in %s" % (k, res[k], msg))
        self.assertEqual(res["valid_ok"] + res["hostile_ok"], res["got"],
                         msg)
        self.assertEqual(res["got"], res["requests"], msg)
        # every request of the cycle was answered, more than once
        for c in cases:
            self.assertGreaterEqual(res["cases"].get(c.name, 0), 2,
                                    "%s: %s" % (c.name, msg))

    def settle(self, pids):
        """After wrk: the workers finish what was in flight; none died."""
        time.sleep(0.5)
        self.assertEqual(self.ngx.workers(), pids,
                         "a worker died" + self.note())

    # -- the test

    def test_load(self):
        t_start = time.time()
        cases = interleave(valid_cases(), hostile_cases())
        self.precompute(cases)
        self.write_manifest(cases)

        pids = self.ngx.workers()
        self.assertEqual(len(pids), 2, pids)
        served = {p: written(p) for p in pids}

        # warm-up: every request on both workers (the Connection: close
        # one moves wrk's connections from worker to worker)
        warm = self.wrk(WARMUP_SECONDS)
        self.assertClean(warm, cases, "warm-up")
        self.settle(pids)
        for p in pids:
            self.assertGreater(written(p), served[p],
                               "worker %d served nothing" % p)
        before = {p: rss_kb(p) for p in pids}

        # the main phase, in segments when long
        totals = {"requests": 0, "valid_ok": 0, "hostile_ok": 0}
        seconds_run = 0.0
        series = ["+".join(str(before[p]) for p in pids)]
        left = MAIN_SECONDS
        while left > 0:
            seconds = min(left, SEGMENT) if SOAK else left
            left -= seconds
            res = self.wrk(seconds)
            self.assertClean(res, cases, "main phase")
            for k in totals:
                totals[k] += res[k]
            seconds_run += res["duration_us"] / 1e6
            self.settle(pids)
            series.append("+".join(str(rss_kb(p)) for p in pids))
            if SOAK:
                sys.stderr.write(
                    "OIP-LOAD-SEGMENT t=%ds requests=%d req/s=%.0f "
                    "p99_ms=%.1f rss_kb=%s\n"
                    % (MAIN_SECONDS - left, res["requests"],
                       res["requests"] / (res["duration_us"] / 1e6),
                       res["latency_p99_us"] / 1e3, series[-1]))
                sys.stderr.flush()
        after = {p: rss_kb(p) for p in pids}

        b, a = sum(before.values()), sum(after.values())
        growth = 100.0 * (a - b) / b
        sys.stderr.write(
            "OIP-LOAD-SUMMARY requests=%d valid_ok=%d hostile_ok=%d "
            "seconds=%.1f req/s=%.0f warmup_requests=%d rss_kb_before=%d "
            "rss_kb_after=%d growth=%.2f%% per_worker_kb=%s series_kb=%s "
            "malloc=%s total_s=%.1f\n"
            % (totals["requests"], totals["valid_ok"], totals["hostile_ok"],
               seconds_run, totals["requests"] / seconds_run,
               warm["requests"], b, a, growth,
               ",".join("%d->%d" % (before[p], after[p]) for p in pids),
               ",".join(series), "default" if MALLOC_DEFAULT else "fixed",
               time.time() - t_start))
        sys.stderr.flush()

        if RSS_MEANINGFUL:
            for p in pids:
                self.assertLess(100.0 * (after[p] - before[p]) / before[p],
                                RSS_GROWTH_LIMIT,
                                "worker %d's RSS grew from %d KB to %d KB"
                                % (p, before[p], after[p]))
            self.assertLess(growth, RSS_GROWTH_LIMIT,
                            "the workers' RSS grew from %d KB to %d KB"
                            % (b, a))


if __name__ == "__main__":
    run_tests()
