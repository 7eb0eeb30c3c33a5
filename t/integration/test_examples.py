#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""The documented configurations load and work: every docs/examples/*.conf,
the README's and each of docs/upstreams.md's passes nginx -t with the
built module and, run in front of the example runtime, answers GET /v2
(server metadata) with the runtime's; the demo answers the commands
./build.sh run prints as printed; directive values are checked."""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import (MODULE, NGINX, NGINX_ENV, ROOT, GatewayTestCase,
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


def runnable(text, runtime_port):
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
                  "grpc_pass grpc://127.0.0.1:%d" % runtime_port, text)
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
                if "oip_signatures" in conf:
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
        """The curl lines ./build.sh run prints, each as printed."""
        printed = open(os.path.join(ROOT, "build.sh")).read()
        printed = printed[printed.index("cat <<'EOT'"):]
        printed = printed[:printed.index("\nEOT\n")]
        cmds = re.findall(r"^curl -s( -i)? http://127\.0\.0\.1:8000(\S+)"
                          r"(?: -d '(.*?)')?$", printed, re.M | re.S)
        self.assertGreaterEqual(len(cmds), 5)
        text = open(os.path.join(ROOT, "docs", "examples",
                                 "demo.conf")).read()
        ngx = self.start_nginx("", conf=runnable(text,
                                                 self.rts["triton"].port))
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
