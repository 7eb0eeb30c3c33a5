#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""The documented configurations load and work: every docs/examples/*.conf,
the README's and each of docs/upstreams.md's passes nginx -t with the
built module and, run in front of the example runtime, answers GET /v2
(server metadata) with the runtime's; the demo answers the commands
./build.sh run prints as printed; directive values are checked.

Every location of every documented configuration (examples, the image's
and the Kubernetes ConfigMaps' gateways, each nginx block of the
Markdown files) that proxies to an upstream block with keepalive speaks
HTTP/1.1 to it without "Connection: close", as nginx's inheritance rules
work it out from a parse of the configuration: else the runtime closes
the connection after answering, nginx hands it to the next request, and
that client gets a 502 under load."""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from collections import namedtuple

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import (MODULE, NGINX, NGINX_ENV, PASS, ROOT, GatewayTestCase,
                     run_tests)
from tensors import pack


def nginx_t(conf_text, extra_g=""):
    d = tempfile.mkdtemp(prefix="oip-conf-")
    os.makedirs(os.path.join(d, "logs"))
    path = os.path.join(d, "nginx.conf")
    with open(path, "w") as f:
        f.write(conf_text)
    # the module may be a sanitizer build: nginx needs its runtime then
    env = dict(os.environ, **NGINX_ENV)
    try:
        r = subprocess.run([NGINX, "-t", "-p", d + "/", "-c", path,
                            "-e", os.path.join(d, "logs", "error.log"),
                            "-g", extra_g or "pid logs/nginx.pid;"],
                           capture_output=True, text=True, env=env)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return r.returncode, r.stderr


# backslash escapes nginx reads in words and quoted strings; any other
# backslash stays as written
ESCAPES = {'"': '"', "'": "'", "\\": "\\", "t": "\t", "r": "\r", "n": "\n"}


def tokens(text):
    """nginx's tokens of a configuration, [(text, bare, line)]: bare words,
    quoted strings (bare False, so that "{" is a string), and "{", "}",
    ";"; a "#" that starts a token comments out the rest of its line.  As
    ngx_conf_read_token: a "{" right after "$" stays in a word (${name}),
    "}" does not end a word, a quoted string ends its token."""
    out = []
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            line += c == "\n"
            i += 1
        elif c == "#":
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif c in "{};":
            out.append((c, True, line))
            i += 1
        elif c in "\"'":
            start, buf, i = line, [], i + 1
            while True:
                if i >= n:
                    raise ValueError("line %d: unclosed %s" % (start, c))
                ch = text[i]
                if ch == c:
                    break
                if ch == "\\" and i + 1 < n:
                    ch = ESCAPES.get(text[i + 1], text[i:i + 2])
                    i += 1
                line += text[i] == "\n"
                buf.append(ch)
                i += 1
            i += 1
            if i < n and text[i] not in " \t\r\n;{)":
                raise ValueError("line %d: unexpected %r after a quoted "
                                 "string" % (line, text[i]))
            out.append(("".join(buf), False, start))
        else:
            buf = []
            while i < n:
                ch = text[i]
                if ch in " \t\r\n;" or (ch == "{" and text[i - 1] != "$"):
                    break
                if ch == "\\" and i + 1 < n:
                    ch = ESCAPES.get(text[i + 1], text[i:i + 2])
                    line += text[i + 1] == "\n"
                    i += 1
                buf.append(ch)
                i += 1
            out.append(("".join(buf), True, line))
    return out


# block is None for a simple directive, its list of directives else
Directive = namedtuple("Directive", "name args block line")


def parse(text):
    """The tree of a configuration: [Directive]."""
    root = []
    stack, words = [root], []
    for value, bare, line in tokens(text):
        if bare and value in "{;" and not words:
            raise ValueError("line %d: unexpected %s" % (line, value))
        if bare and value == ";":
            stack[-1].append(Directive(words[0], words[1:], None, line))
            words = []
        elif bare and value == "{":
            d = Directive(words[0], words[1:], [], line)
            stack[-1].append(d)
            stack.append(d.block)
            words = []
        elif bare and value == "}":
            if words or len(stack) == 1:
                raise ValueError("line %d: unexpected }" % line)
            stack.pop()
        else:
            words.append(value)
    if words or len(stack) > 1:
        raise ValueError("unexpected end of configuration")
    return root


# the blocks whose proxy_ directives a location inherits or holds
PROXY_CONTEXTS = ("http", "server", "location", "if", "limit_except")


def keepalive_gaps(text):
    """[(location, [what it lacks])]: each location (nested ones named
    "outer > inner") with a proxy_pass, its own or in an if or
    limit_except of its, to http(s)://NAME where "upstream NAME" of the
    same configuration holds keepalive, whose effective
    proxy_http_version is not 1.1 or whose effective proxy_set_header
    list has no Connection "".  nginx's inheritance: proxy_http_version
    comes from the innermost level setting it (1.0 else); the innermost
    level with any proxy_set_header defines the whole list.  A host
    taken from a variable, or one that is no upstream block, is no pool
    of this configuration; grpc_pass is HTTP/2, with rules of its own."""
    tree = parse(text)
    pools = set()

    def find_pools(nodes):
        for d in nodes:
            if d.block is None:
                continue
            if (d.name == "upstream" and d.args
                    and any(k.name == "keepalive" for k in d.block)):
                pools.add(d.args[0].lower())
            find_pools(d.block)

    find_pools(tree)
    gaps = []

    def walk(nodes, version, headers, where):
        own = [d for d in nodes if d.block is None]
        for d in own:
            if d.name == "proxy_http_version" and d.args:
                version = d.args[0]
        sets = [(d.args + [None])[:2] for d in own
                if d.name == "proxy_set_header" and d.args]
        headers = sets or headers
        for d in own:
            if not (where and d.name == "proxy_pass" and d.args):
                continue
            host = re.match(r"(?i)https?://([^/]*)", d.args[0])
            if not host or "$" in host.group(1) \
                    or host.group(1).lower() not in pools:
                continue
            lacks = []
            if version != "1.1":
                lacks.append("proxy_http_version 1.1")
            if not any(h.lower() == "connection" and v == ""
                       for h, v in headers):
                lacks.append('proxy_set_header Connection ""')
            if lacks and (where, lacks) not in gaps:
                gaps.append((where, lacks))
        for d in nodes:
            if d.block is None or d.name not in PROXY_CONTEXTS:
                continue
            inner = where
            if d.name == "location":
                inner = " > ".join(filter(None, [where, "location " +
                                                 " ".join(d.args)]))
            walk(d.block, version, headers, inner)

    walk(tree, "1.0", [], "")
    return gaps


def every_configuration():
    """(where, text) of every nginx configuration the repository
    documents: docs/examples/*.conf, docs/deploy/image/*.conf, each
    ConfigMap's of docs/deploy/kubernetes/, and each nginx block of
    README.md and of docs/ (file:line; a line "..." elides, it goes)."""
    out = []
    for pattern in (("docs", "examples", "*.conf"),
                    ("docs", "deploy", "image", "*.conf")):
        for path in sorted(glob.glob(os.path.join(ROOT, *pattern))):
            out.append((os.path.relpath(path, ROOT), open(path).read()))
    for path in sorted(glob.glob(os.path.join(ROOT, "docs", "deploy",
                                              "kubernetes", "*.yaml"))):
        with open(path) as f:
            for obj in yaml.safe_load_all(f):
                if obj and obj.get("kind") == "ConfigMap":
                    for key, text in sorted(obj.get("data", {}).items()):
                        if key.endswith(".conf"):
                            out.append(("%s: %s" % (os.path.relpath(
                                path, ROOT), key), text))
    mds = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(
        os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    for path in mds:
        text = open(path).read()
        for m in re.finditer(r"^```nginx\n(.*?)^```", text, re.S | re.M):
            out.append(("%s:%d" % (os.path.relpath(path, ROOT),
                                   text.count("\n", 0, m.start()) + 1),
                        re.sub(r"^\s*\.\.\.$", "", m.group(1),
                               flags=re.M)))
    return out


class Examples(unittest.TestCase):

    def test_examples_load(self):
        files = sorted(glob.glob(os.path.join(ROOT, "docs", "examples",
                                              "*.conf")))
        self.assertGreaterEqual(len(files), 4)
        for path in files:
            with self.subTest(conf=os.path.basename(path)):
                text = open(path).read().replace(
                    "modules/ngx_http_oip_module.so", MODULE)
                # logs and caches where the test may write
                var = tempfile.mkdtemp(prefix="oip-var-")
                self.addCleanup(shutil.rmtree, var, True)
                text = re.sub(r"/var/(cache|log)/nginx/", var + "/", text)
                extra = ""
                if not re.search(r"^\s*load_module", text, re.M):
                    extra = "load_module %s;" % MODULE
                if not re.search(r"^\s*pid ", text, re.M):
                    extra += " pid logs/nginx.pid;"
                rc, err = nginx_t(text, extra)
                self.assertEqual(rc, 0, err)

    def conf(self, directives):
        return ("load_module %s;\nevents {}\nhttp { server { listen "
                "127.0.0.1:1; location / { %s } } }\n" % (MODULE, directives))

    def test_bad_values_are_refused(self):
        for d, msg in [("oip maybe;", "invalid value"),
                       ("oip_upstream_inputs protobuf;", "invalid value"),
                       ("oip_max_json_size lots;", "invalid value"),
                       ("oip_max_depth 0;", "must be between 1 and 100000"),
                       ("oip_max_depth 100001;", "must be between 1 and 100000"),
                       ("oip_max_tensor_size 1t;", "invalid value"),
                       ("oip on; oip on;", "is duplicate"),
                       ("oip_signatures /m;", "takes URI zone=NAME"),
                       ("oip_signatures /m/ zone=z;", "does not end with"),
                       ("oip_signatures m zone=z;", "starts with"),
                       ("oip_signatures /m zone=;", "takes URI zone=NAME"),
                       ("oip_signatures /m zone=nowhere;",
                        "zero size shared memory zone"),
                       ("oip_signature_fail maybe;", "invalid value"),
                       ("oip_signature_coerce perhaps;", "invalid value"),
                       ("oip_signature_optional :x;", "is not [MODEL:]INPUT"),
                       ("oip_signature_optional m:;", "is not [MODEL:]INPUT"),
                       ("oip_upstream_header_carrier amazon;",
                        "invalid value"),
                       ("oip_upstream_protocol soap;", "invalid value"),
                       ("oip_grpc_contents json;", "invalid value")]:
            with self.subTest(directive=d):
                rc, err = nginx_t(self.conf(d))
                self.assertNotEqual(rc, 0)
                self.assertIn(msg, err)

    def test_bad_zones(self):
        for http, msg in [
                ("oip_signature_zone zone=z:1k;", "is too small"),
                ("oip_signature_zone zone=z;", "takes zone=NAME:SIZE"),
                ("oip_signature_zone valid=1s;", "must have \"zone\""),
                ("oip_signature_zone zone=z:1m valid=soon;", "invalid time"),
                ("oip_signature_zone zone=z:1m x=1;", "invalid parameter"),
                ("oip_signature_zone zone=z:1m; oip_signature_zone "
                 "zone=z:1m;", "is already declared"),
                ("oip_metrics_zone zone=m:64k models=100;",
                 "is too small for 100 models"),
                ("oip_metrics_zone zone=m:1m models=x;", "invalid"),
                ("oip_metrics_zone models=3;", "takes zone=NAME:SIZE"),
                ("oip_metrics_zone zone=m:1m; oip_metrics_zone zone=n:1m;",
                 "is duplicate")]:
            with self.subTest(http=http):
                rc, err = nginx_t("load_module %s;\nevents {}\nhttp { %s "
                                  "server { listen 127.0.0.1:1; } }\n"
                                  % (MODULE, http))
                self.assertNotEqual(rc, 0)
                self.assertIn(msg, err)

    def test_good_values(self):
        rc, err = nginx_t(self.conf(
            "oip on; oip_upstream_inputs json; oip_max_json_size 1k; "
            "oip_max_tensor_size 1g; oip_max_depth 100000; "
            "oip_upstream_header_carrier vertex;"))
        self.assertEqual(rc, 0, err)

    def test_keepalive_pools_get_http11(self):
        """No documented location sends a keepalive pool HTTP/1.0 or
        "Connection: close" (5 requests in 33,000 were 502s so)."""
        confs = every_configuration()
        self.assertGreaterEqual(len(confs), 30)
        for where, text in confs:
            with self.subTest(conf=where):
                for loc, lacks in keepalive_gaps(text):
                    self.fail("%s: %s proxies to a keepalive upstream "
                              "without %s" % (where, loc, " and ".join(lacks)))

    def test_keepalive_checker(self):
        """The check above flags what it must, with nginx's inheritance,
        and only that."""
        pool = "upstream rt { server 127.0.0.1:1; keepalive 8; }\n"
        both = ["proxy_http_version 1.1", 'proxy_set_header Connection ""']
        conn = ['proxy_set_header Connection ""']
        for conf, gaps in [
                # the documented one: /v2/ right, = /v2 left as it was
                ("""http { %s server {
                      location /v2/ { proxy_http_version 1.1;
                          proxy_set_header Connection "";
                          proxy_pass http://rt; }
                      location = /v2 { proxy_pass http://rt; } } }""" % pool,
                 [("location = /v2", both)]),
                # server's settings, but a location's own list drops them
                ("""http { %s server { proxy_http_version 1.1;
                      proxy_set_header Connection "";
                      location /v2/ { proxy_pass http://rt; }
                      location /_meta/ { proxy_set_header Content-Length "";
                          proxy_pass http://rt/; } } }""" % pool,
                 [("location /_meta/", conn)]),
                # nested locations, an if, limit_except, https, case
                ("""http { %s server { location /v2/ {
                      proxy_http_version 1.1; proxy_set_header Connection "";
                      location ~ "/infer$" { proxy_set_header X-M $oip_model;
                          proxy_pass https://RT; }
                      location /v2/health/ { proxy_pass http://rt; } }
                    location = /v2 { if ($http_x) { proxy_pass http://rt; } }
                    location /x/ { proxy_http_version 1.1;
                      limit_except GET { proxy_pass http://rt; } } } }"""
                 % pool,
                 [("location /v2/ > location ~ /infer$", conn),
                  ("location = /v2", both), ("location /x/", conn)]),
                # a comment, another value, an older version, a variable
                # in the path only: all still the pool
                ("""%s server { proxy_http_version 1.1;
                      location /a/ { # proxy_set_header Connection "";
                          proxy_pass http://rt; }
                      location /b/ { proxy_set_header Connection close;
                          proxy_pass http://rt; }
                      location /c/ { proxy_set_header Connection '';
                          proxy_http_version 1.0; proxy_pass http://rt; }
                      location /d/ { proxy_pass http://rt/m/$oip_model; }
                    }""" % pool,
                 [("location /a/", conn), ("location /b/", conn),
                  ("location /c/", ["proxy_http_version 1.1"]),
                  ("location /d/", conn)]),
                # http's and server's settings inherited; other headers
                # beside Connection; quoted braces and semicolons
                ("""http { proxy_http_version 1.1; %s server {
                      proxy_set_header connection "";
                      proxy_set_header X-A "a;{}\\"#";
                      location / { proxy_pass http://rt; }
                      location /n/ { location /n/m/ { proxy_pass http://rt; } }
                      location ~ "^/v2/a{2}" { proxy_pass http://rt; } } }"""
                 % pool, []),
                # no keepalive: each request has its connection anyway
                ("""upstream rt { server 127.0.0.1:1; keepalive_timeout 5s; }
                    server { location = /v2 { proxy_pass http://rt; } }""",
                 []),
                # a variable host, a host with a port, not an upstream;
                # gRPC; a map whose keys look like directives
                ("""http { %s map $uri $pool { default rt; proxy_pass 1; }
                    server { location /a/ { proxy_pass http://$pool; }
                      location /b/ { proxy_pass http://rt2:8000; }
                      location /c/ { proxy_pass http://127.0.0.1:8000; }
                      location /d/ { grpc_pass grpc://rt; } } }""" % pool,
                 [])]:
            with self.subTest(conf=conf[:60]):
                self.assertEqual(keepalive_gaps(conf), gaps)

    def test_parser(self):
        """Tokens as nginx reads them (\\; keeps its backslash, as in
        nginx), and broken nesting refused."""
        self.assertEqual(
            [(d.name, d.args) for d in parse(
                'a "b\\"c" \'d e\' f\\;g "" ${x}y #c;\n "h;{" ;')],
            [("a", ['b"c', "d e", "f\\;g", "", "${x}y", "h;{"])])
        tree = parse("if ($a = \"x\") { return 200 '}'; }")
        self.assertEqual((tree[0].name, tree[0].args), ("if", ["($a", "=",
                                                                "x", ")"]))
        self.assertEqual(tree[0].block[0].args, ["200", "}"])
        for bad in ["a {", "a; }", "{ a; }", "a", "a \"b;", ";",
                    'a "b"c;']:
            with self.subTest(conf=bad):
                self.assertRaises(ValueError, parse, bad)


def documented():
    """(where, configuration text, family it is written for): every
    configuration the docs give, examples whole, snippets as written."""
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "docs", "examples",
                                              "*.conf"))):
        name = os.path.basename(path)
        out.append((name, open(path).read(),
                    "mlserver" if name == "translator.conf" else "triton"))
    readme = open(os.path.join(ROOT, "README.md")).read()
    for block in re.findall(r"```nginx\n(.*?)```", readme, re.S):
        out.append(("README.md", block, "triton"))
    section = None
    for part in re.split(r"^## ", open(os.path.join(
            ROOT, "docs", "upstreams.md")).read(), flags=re.M):
        for block in re.findall(r"```nginx\n(.*?)```", part, re.S):
            family = ("kserve" if part.startswith("KServe") else
                      "openvino" if part.startswith("OpenVINO") else
                      "mlserver" if part.startswith("MLServer") else
                      "grpc" if part.startswith("gRPC") else
                      "triton")
            out.append(("upstreams.md: " + part.split("\n")[0], block,
                        family))
    return out


def runnable(text, runtime_port, grpc_port=None):
    """A documented configuration, pointed at the example runtime and
    listening where the test says."""
    text = re.sub(r"load_module\s+\S+;", "load_module @MODULE@;", text)
    # logs and caches in the test's own prefix
    text = re.sub(r"/var/(cache|log)/nginx/", "@DIR@/", text)
    text = re.sub(r"listen\s+[^;]+;", "listen 127.0.0.1:@PORT@;", text)
    text = re.sub(r"(\bserver\s+)[\w.-]+:\d+", r"\g<1>127.0.0.1:%d"
                  % runtime_port, text)
    text = re.sub(r"proxy_pass http://[\w.-]+:\d+",
                  "proxy_pass http://127.0.0.1:%d" % runtime_port, text)
    text = re.sub(r"grpc_pass grpc://[\w.-]+:\d+",
                  "grpc_pass grpc://127.0.0.1:%d" % (grpc_port or runtime_port),
                  text)
    if not re.search(r"^\s*http\s*{", text, re.M):
        # a snippet of location blocks
        text = ("http {\n server {\n  listen 127.0.0.1:@PORT@;\n%s }\n}\n"
                % text)
    if not re.search(r"^\s*events\s*{", text, re.M):
        text += "events {}\n"
    if not re.search(r"^\s*pid\s", text, re.M):
        # not the system's /run/nginx.pid
        text += "pid @DIR@/nginx.pid;\n"
    if not re.search(r"^\s*load_module", text, re.M):
        text = "load_module @MODULE@;\n" + text
    return text


class Documented(GatewayTestCase):
    """Each documented configuration, run in front of the runtime it is
    written for."""

    @classmethod
    def setUpGateway(cls):
        cls.rts = {f: cls.start_runtime(f)
                   for f in ("triton", "kserve", "openvino", "mlserver")}
        cls.rts["grpc"] = cls.start_grpc_runtime()

    # each configuration starts an nginx of its own, 2 s under valgrind
    # (22 s in all): their directives run under valgrind in the other
    # files, and these configurations under ASan
    @unittest.skipIf(PASS == "valgrind", "a start each, slow under valgrind")
    def test_documented_configurations_answer_get_v2(self):
        confs = documented()
        self.assertGreaterEqual(len(confs), 9)
        for where, text, family in confs:
            with self.subTest(conf=where):
                conf = runnable(text, self.rts[family].port)
                ngx = self.start_nginx("", conf=conf)
                st, h, body = ngx.request("GET", "/v2")
                self.assertEqual(st, 200, body)
                self.assertEqual(h["content-type"], "application/json")
                self.assertIn("name", json.loads(body))
                st, _, _ = ngx.request("GET", "/v2/health/ready")
                self.assertEqual(st, 200)
                # where infer requests are checked against signatures
                if re.search(r"location /v2/ \{[^}]*oip_signatures", conf):
                    self.signatures_work(ngx, family)

    def signatures_work(self, ngx, family):
        """A configuration with oip_signatures checks requests."""
        self.assertIn(family, ("triton", "grpc"))
        good = {"inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32",
             "data": list(range(16))},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32",
             "data": [1] * 16}]}
        st, _, body = ngx.post("/v2/models/simple/infer", json.dumps(good))
        self.assertEqual(st, 200, body)
        good["inputs"][1]["datatype"] = "FP32"
        st, _, body = ngx.post("/v2/models/simple/infer", json.dumps(good))
        self.assertEqual(st, 400, body)
        self.assertIn(b"expects INT32", body)
        st, _, body = ngx.post("/v2/models/nosuch/infer", json.dumps(good))
        self.assertEqual(st, 404, body)

    def test_demo_answers_what_build_sh_prints(self):
        """The curl lines ./build.sh run prints, each as printed (the
        streams' in the plain pass only: they wait for their events)."""
        with open(os.path.join(ROOT, "build.sh")) as f:
            build = f.read()
        printed = build[build.index("cat <<'EOT'"):]
        printed = printed[:printed.index("\nEOT\n")]
        cmds = re.findall(r"^curl -s( -i)? http://127\.0\.0\.1:8000(\S+)"
                          r"(?: -d '(.*?)')?$", printed, re.M | re.S)
        self.assertGreaterEqual(len(cmds), 5)
        with open(os.path.join(ROOT, "docs", "examples", "demo.conf")) as f:
            text = f.read()
        # the gRPC runtime for the streams, started as build.sh starts it
        args = re.search(r"oip_grpc_runtime\.py\" --port 8002 \\\n\s*(.*) &",
                         build).group(1)
        grpc = (self.start_grpc_runtime(args.split()) if PASS == "plain"
                else self.rts["grpc"])
        ngx = self.start_nginx("", conf=runnable(text,
                                                 self.rts["triton"].port,
                                                 grpc.port))
        streams = re.findall(r"^curl -sN http://127\.0\.0\.1:8000(\S+) "
                             r"-d '(.*?)'$", printed, re.M | re.S)
        self.assertEqual(len(streams), 2)
        answers = {m: int(n) for m, n in
                   re.findall(r"--decoupled (\w+):(\d+):", args)}
        for path, data in streams if PASS == "plain" else ():
            st, out = ngx.curl("-N", "-d", data, "{base}" + path)
            self.assertEqual(st, 200, out)
            evs = [json.loads(e[len(b"data: "):])
                   for e in out.split(b"\n\n") if e]
            self.assertEqual(len(evs), answers[path.split("/")[3]], out)
            doc = json.loads(data)
            for e in evs:
                if "inputs" in doc:
                    self.assertEqual(e["outputs"][0]["data"],
                                     doc["inputs"][0]["data"])
                else:
                    # generate: each output at the top level
                    self.assertEqual(e["OUTPUT0"], doc["INPUT0"])
        for shows, path, data in cmds:
            with self.subTest(path=path, data=data[:40]):
                if data:
                    st, h, body = ngx.post(path, data.encode())
                else:
                    st, h, body = ngx.request("GET", path)
                # the one shown with its headers (-i) is the refused one
                self.assertEqual(st, 400 if shows else 200, body)
                doc = json.loads(body)
                if "FP16" in data:
                    sent = json.loads(data)["inputs"][0]["data"]
                    got = doc["outputs"][0]["data"]
                    self.assertEqual(pack("FP16", got), pack("FP16", sent))


if __name__ == "__main__":
    run_tests()
