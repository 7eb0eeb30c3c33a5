#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""$oip_digest and caching inference answers with nginx's proxy_cache,
two workers: the digest the same for every encoding of the same tensors
and another for any change; the documented configuration (docs/
operations.md) serving the second encoding of a request from the cache,
each client in its own form and with its own id; each of its lines
shown to matter by removing it; and an answer the module refuses never
served from the cache."""

import gzip
import hashlib
import json
import os
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import (GatewayTestCase, IHCL, SLOW, binary_body, run_tests,
                     split_binary, unhurried)
from test_signatures import Hooks

# the documented configuration, line by line (docs/operations.md)
HTTP = """
    proxy_cache_path {dir}/cache levels=1:2 keys_zone=infer:1m max_size=64m
                     inactive=10m use_temp_path=off;
    map $oip_digest $oip_nocache {{ "" 1; default 0; }}
    log_format digest '$request_uri $oip_digest $upstream_cache_status';
"""

LINES = {
    "methods": "proxy_cache_methods POST;",
    "key": 'proxy_cache_key "$proxy_host$oip_digest";',
    "lock": "proxy_cache_lock on;",
    "no_cache": "proxy_no_cache $oip_nocache;",
    "bypass": "proxy_cache_bypass $oip_nocache;",
}


def location(path, upstream, without=(), extra="", inputs="keep",
             outputs="binary"):
    lines = [v for k, v in LINES.items() if k not in without]
    if "key" in without:
        lines.append('proxy_cache_key "$oip_digest";')
    return """
        location %s {{
            oip on;
            oip_upstream_inputs %s;
            oip_upstream_outputs %s;
            proxy_cache infer;
            proxy_cache_valid 200 10m;
            %s
            %s
            proxy_pass http://127.0.0.1:{%s}/;
        }}""" % (path, inputs, outputs, "\n            ".join(lines), extra,
                 upstream)


def simple(a, b, ident=None, nested=False):
    def t(name, data):
        return {"name": name, "datatype": "INT32", "shape": [1, 16],
                "data": [list(data)] if nested else list(data)}
    doc = {"inputs": [t("INPUT0", a), t("INPUT1", b)]}
    if ident is not None:
        doc["id"] = ident
    return doc


def simple_binary(a, b, ident=None, binary_out=True):
    header = {"inputs": [
        {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16],
         "parameters": {"binary_data_size": 64}},
        {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16],
         "parameters": {"binary_data_size": 64}}],
        "parameters": {"binary_data_output": binary_out}}
    if ident is not None:
        header["id"] = ident
    return binary_body(header, [struct.pack("<16i", *b),
                                struct.pack("<16i", *a)])


A = list(range(16))
B = [3] * 16


class Digest(GatewayTestCase):

    @classmethod
    def setUpGateway(cls):
        cls.rt = cls.start_runtime("triton")
        server = """
        access_log {dir}/digest.log digest;
        location /keep/ {{
            oip on;
            proxy_pass http://127.0.0.1:{rt}/;
        }}
        location /binary/ {{
            oip on;
            oip_upstream_inputs binary;
            oip_upstream_outputs binary;
            proxy_pass http://127.0.0.1:{rt}/;
        }}
        location /raw/ {{
            oip on;
            oip_raw_input INPUT0 INT32 1,16;
            proxy_pass http://127.0.0.1:{rt}/;
        }}
"""
        cls.ngx = cls.start_nginx(server, http=HTTP, workers=2,
                                  rt=cls.rt.port)
        cls.log = os.path.join(cls.ngx.dir, "digest.log")

    def digest(self, uri, body, headers=None, status=200):
        """The digest logged for a request (status None: any)."""
        uri += "?%d" % time.monotonic_ns()
        st, _, out = self.ngx.post(uri, body, headers)
        if status is not None:
            self.assertEqual(st, status, out)
        deadline = time.time() + 5 * SLOW
        while time.time() < deadline:
            with open(self.log) as f:
                for line in f:
                    fields = line.split()
                    if fields[0] == uri:
                        return fields[1] if fields[1] != "-" else ""
            time.sleep(0.05)
        self.fail("no log line for " + uri)

    def test_same_for_every_encoding(self):
        m = "/v2/models/simple/infer"
        want = self.digest("/keep" + m, json.dumps(simple(A, B, "a")))
        self.assertRegex(want, "^[0-9a-f]{64}$")
        body, n = simple_binary(A, B, "b", binary_out=False)
        gz = gzip.compress(json.dumps(simple(A, B, nested=True)).encode())
        sched = simple(A, B, "d")
        sched["parameters"] = {"priority": 1, "timeout": 60000000}
        for what, uri, body, headers in [
                ("nested, no id", "/keep" + m,
                 json.dumps(simple(A, B, nested=True)), None),
                # when and whether it runs, not what it answers
                ("a priority and a timeout", "/keep" + m, json.dumps(sched),
                 None),
                ("binary, inputs reordered", "/keep" + m, body,
                 {IHCL: str(n)}),
                ("gzip", "/keep" + m, gz, {"Content-Encoding": "gzip"}),
                ("converted to binary upstream", "/binary" + m,
                 json.dumps(simple(A, B, "c")), None)]:
            with self.subTest(what=what):
                got = self.digest(uri, body, headers)
                if what.startswith("converted"):
                    # its outputs are asked as binary: another answer
                    self.assertNotEqual(got, want)
                else:
                    self.assertEqual(got, want)

    def test_another_for_any_change(self):
        m = "/keep/v2/models/simple/infer"
        base = self.digest(m, json.dumps(simple(A, B)))
        seen = {base}
        value = simple(A, B)
        value["inputs"][1]["data"][5] = 4
        output = simple(A, B)
        output["outputs"] = [{"name": "OUTPUT0"}]
        param = simple(A, B)
        param["parameters"] = {"temperature": 1}
        for what, uri, doc in [
                ("a value", m, value),
                ("the outputs", m, output),
                ("a parameter", m, param),
                ("another model", "/keep/v2/models/identity/infer",
                 simple(A, B)),
                ("a version", "/keep/v2/models/simple/versions/1/infer",
                 simple(A, B))]:
            with self.subTest(what=what):
                got = self.digest(uri, json.dumps(doc))
                self.assertNotIn(got, seen)
                seen.add(got)
        shape = {"inputs": [{"name": "INPUT0", "datatype": "INT32",
                             "shape": [16], "data": A}]}
        name = {"inputs": [{"name": "INPUT1", "datatype": "INT32",
                            "shape": [1, 16], "data": A}]}
        one = {"inputs": [{"name": "INPUT0", "datatype": "INT32",
                           "shape": [1, 16], "data": A}]}
        ident = "/keep/v2/models/identity/infer"
        got = {self.digest(ident, json.dumps(d)) for d in (shape, name, one)}
        self.assertEqual(len(got), 3)

    def test_raw_as_its_json(self):
        m = "/v2/models/identity/infer"
        raw = self.digest("/raw" + m, struct.pack("<16i", *A), {IHCL: "0"})
        doc = {"inputs": [{"name": "INPUT0", "datatype": "INT32",
                           "shape": [1, 16], "data": A}]}
        self.assertEqual(self.digest("/keep" + m, json.dumps(doc)), raw)

    def test_empty_when_nothing_to_key_on(self):
        self.assertEqual(self.digest("/keep/v2/models/simple/infer",
                                     "{", status=400), "")
        shm = {"inputs": [{"name": "INPUT0", "datatype": "INT8",
                           "shape": [1], "parameters": {
                               "shared_memory_region": "r",
                               "shared_memory_byte_size": 1}}]}
        self.assertEqual(self.digest("/keep/v2/models/identity/infer",
                                     json.dumps(shm), status=None), "")


class Cache(GatewayTestCase):
    """The documented configuration in front of the example runtime."""

    @classmethod
    def setUpGateway(cls):
        cls.rt = cls.start_runtime("triton")
        cls.hooks = Hooks(cls.rt.port)
        server = location("/", "rt") + """
        location /health/ {{
            proxy_pass http://127.0.0.1:{rt}/v2/health/;
        }}
"""
        cls.ngx = cls.start_nginx(server, http=HTTP, workers=2,
                                  rt=cls.rt.port)

    def test_second_encoding_hits(self):
        """A JSON client, then a binary one, then one without an id:
        the runtime answers once; each gets its form and its id."""
        a = [7] * 16
        before = self.hooks.infer("simple")
        st, h, out = self.ngx.post("/v2/models/simple/infer",
                                   json.dumps(simple(a, B, "first")))
        self.assertEqual((st, h["content-type"]), (200, "application/json"))
        doc = json.loads(out)
        self.assertEqual(doc["id"], "first")
        sums = {o["name"]: o["data"] for o in doc["outputs"]}
        self.assertEqual(sums["OUTPUT0"], [10] * 16)

        body, n = simple_binary(a, B, "second")
        st, h, out = self.ngx.post("/v2/models/simple/infer", body,
                                   {IHCL: str(n)})
        self.assertEqual(st, 200, out)
        header, rest = split_binary(h, out)
        self.assertEqual(header["id"], "second")
        self.assertEqual(rest[:64], struct.pack("<16i", *([10] * 16)))

        st, h, out = self.ngx.post("/v2/models/simple/infer",
                                   json.dumps(simple(a, B)))
        self.assertEqual(st, 200, out)
        self.assertNotIn("id", json.loads(out))
        self.assertEqual(self.hooks.infer("simple") - before, 1)

    def test_get_never_shares_an_entry(self):
        st, _, one = self.ngx.request("GET", "/v2/models/simple")
        st2, _, two = self.ngx.request("GET", "/v2/models/identity")
        self.assertEqual((st, st2), (200, 200))
        self.assertEqual(json.loads(one)["name"], "simple")
        self.assertEqual(json.loads(two)["name"], "identity")


class Families(GatewayTestCase):
    """The cache in front of each runtime family the example runtime
    imitates, configured as docs/upstreams.md says (MLServer: JSON both
    ways): a JSON client, then a binary one, the runtime asked once."""

    FAMILIES = ["triton", "kserve", "openvino", "mlserver"]

    @classmethod
    def setUpGateway(cls):
        cls.rts = {f: cls.start_runtime(f) for f in cls.FAMILIES}
        server = ""
        for f in cls.FAMILIES:
            form = "json" if f == "mlserver" else "binary"
            server += location("/%s/" % f, f, inputs=form, outputs=form)
        cls.ngx = cls.start_nginx(server, http=HTTP, workers=2,
                                  **{f: cls.rts[f].port
                                     for f in cls.FAMILIES})

    def test_hit_in_front_of_each(self):
        a = [21] * 16
        for f in self.FAMILIES:
            with self.subTest(family=f):
                hooks = Hooks(self.rts[f].port)
                before = hooks.infer("simple")
                uri = "/%s/v2/models/simple/infer" % f
                st, h, out = self.ngx.post(uri, json.dumps(simple(a, B, "j")))
                self.assertEqual(st, 200, out)
                doc = json.loads(out)
                self.assertEqual(doc.get("id"), "j")
                sums = {o["name"]: o["data"] for o in doc["outputs"]}
                self.assertEqual(sums["OUTPUT0"], [24] * 16)
                body, n = simple_binary(a, B, "b")
                st, h, out = self.ngx.post(uri, body, {IHCL: str(n)})
                self.assertEqual(st, 200, out)
                header, rest = split_binary(h, out)
                self.assertEqual(header["id"], "b")
                names = [o["name"] for o in header["outputs"]]
                at = names.index("OUTPUT0") * 64
                self.assertEqual(rest[at:at + 64],
                                 struct.pack("<16i", *([24] * 16)))
                self.assertEqual(hooks.infer("simple") - before, 1)


class EachLine(GatewayTestCase):
    """Each line of the documented configuration, removed: what goes
    wrong without it."""

    @classmethod
    def setUpGateway(cls):
        cls.rt = cls.start_runtime("triton")
        cls.rt2 = cls.start_runtime("triton")
        cls.hooks = Hooks(cls.rt.port)
        cls.hooks2 = Hooks(cls.rt2.port)
        cls.slow = cls.start_recorder()
        server = "".join([
            location("/full/", "rt"),
            location("/full2/", "rt2"),
            location("/nomethods/", "rt", without=("methods",)),
            location("/nokey/", "rt", without=("key",)),
            location("/nokey2/", "rt2", without=("key",)),
            location("/lock/", "slow"),
            location("/nolock/", "slow", without=("lock",)),
            location("/nomap/", "rt", without=("no_cache", "bypass")),
            location("/nobypass/", "rt", without=("bypass",))])
        cls.ngx = cls.start_nginx(server, http=HTTP, workers=2,
                                  rt=cls.rt.port, rt2=cls.rt2.port,
                                  slow=cls.slow.port)

    def twice(self, prefix, doc, hooks=None):
        hooks = hooks or self.hooks
        before = hooks.infer("simple")
        for _ in range(2):
            st, _, out = self.ngx.post(prefix + "v2/models/simple/infer",
                                       json.dumps(doc))
            self.assertEqual(st, 200, out)
        return hooks.infer("simple") - before

    def test_methods(self):
        self.assertEqual(self.twice("/full/", simple([11] * 16, B)), 1)
        self.assertEqual(self.twice("/nomethods/", simple([12] * 16, B)), 2)

    def test_key_has_the_fleet(self):
        """Two fleets behind one zone: $proxy_host keeps them apart."""
        doc = simple([13] * 16, B)
        self.twice("/full/", doc)
        self.assertEqual(self.twice("/full2/", doc, self.hooks2), 1)
        doc = simple([14] * 16, B)
        self.twice("/nokey/", doc)
        # without it the second fleet is never asked: the first answers
        self.assertEqual(self.twice("/nokey2/", doc, self.hooks2), 0)

    def concurrent(self, prefix, n=6):
        self.slow.clear()

        def slow_answer(req):
            time.sleep(0.5)
            return (200, {"Content-Type": "application/json"},
                    b'{"model_name":"m","outputs":[]}')
        self.slow.answer = slow_answer
        doc = json.dumps({"inputs": [{"name": "x", "datatype": "INT8",
                                      "shape": [1], "data": [len(prefix)]}]})
        threads = [threading.Thread(
            target=self.ngx.post, args=(prefix + "v2/models/m/infer", doc))
            for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return len(self.slow.requests)

    @unhurried
    def test_lock(self):
        self.assertEqual(self.concurrent("/lock/"), 1)
        self.assertGreater(self.concurrent("/nolock/"), 1)

    def test_map(self):
        """GET and HEAD are always cached and their digest is empty:
        without the map, health and metadata share one entry."""
        st, _, one = self.ngx.request("GET", "/nomap/v2/models/simple")
        st, _, two = self.ngx.request("GET", "/nomap/v2/models/identity")
        self.assertEqual(json.loads(two)["name"], "simple")
        st, _, two = self.ngx.request("GET", "/full/v2/models/identity")
        self.assertEqual(json.loads(two)["name"], "identity")

    def test_bypass(self):
        """An entry under the empty digest from elsewhere (/nomap/ stored
        one, as a configuration before a reload would): proxy_no_cache
        alone stores none, proxy_cache_bypass keeps from serving it."""
        self.ngx.request("GET", "/nomap/v2/models/simple")
        st, _, two = self.ngx.request("GET", "/nobypass/v2/models/fail")
        self.assertEqual(json.loads(two)["name"], "simple")
        st, _, two = self.ngx.request("GET", "/full/v2/models/fail")
        self.assertEqual(json.loads(two)["name"], "fail")


class Refused(GatewayTestCase):
    """An answer the module refuses is never served from the cache, with
    a Content-Length, chunked, or to the connection's close."""

    @classmethod
    def setUpGateway(cls):
        cls.rec = cls.start_recorder()
        cls.ngx = cls.start_nginx(location("/", "rec", extra="""
            oip_max_json_size 8k;
            oip_max_tensor_size 8k;"""), http=HTTP, workers=2,
                                  rec=cls.rec.port)

    GOOD = (b'{"model_name":"m","outputs":[{"name":"y","datatype":"INT8",'
            b'"shape":[1],"data":[5]}]}')

    # refused once it is all there (nginx stored it: taken out), and
    # while it comes, too large (dropped before it is stored)
    BAD = [b'{"outputs":[',
           b'{"model_name":"m","pad":"' + b"x" * 100000 + b'","outputs":[]}']

    def test_refused_not_served(self):
        framings = ({}, {"Transfer-Encoding": "chunked"},
                    {"Content-Length": None})
        cases = [(f, b) for f in framings for b in self.BAD]
        for n, (framing, bad_body) in enumerate(cases):
            with self.subTest(framing=framing, size=len(bad_body)):
                self.rec.clear()
                bad = [True]

                def answer(req):
                    h = {"Content-Type": "application/json"}
                    h.update(framing)
                    return 200, h, bad_body if bad[0] else self.GOOD
                self.rec.answer = answer
                doc = json.dumps({"inputs": [{
                    "name": "x", "datatype": "INT8", "shape": [1],
                    "data": [n]}]})
                self.assertJSONError(self.ngx.post(
                    "/v2/models/m/infer", doc), 502, "upstream answer")
                bad[0] = False
                st, _, out = self.ngx.post("/v2/models/m/infer", doc)
                self.assertEqual((st, json.loads(out)["outputs"][0]["data"]),
                                 (200, [5]))
                self.assertEqual(len(self.rec.requests), 2)
                # and the good one is cached
                self.ngx.post("/v2/models/m/infer", doc)
                self.assertEqual(len(self.rec.requests), 2)


if __name__ == "__main__":
    run_tests()
