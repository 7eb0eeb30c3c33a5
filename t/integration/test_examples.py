#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""The documented configurations load: every docs/examples/*.conf passes
nginx -t with the built module, and directive values are checked."""

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import MODULE, NGINX, NGINX_ENV, ROOT, run_tests


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
                       ("oip on; oip on;", "is duplicate")]:
            with self.subTest(directive=d):
                rc, err = nginx_t(self.conf(d))
                self.assertNotEqual(rc, 0)
                self.assertIn(msg, err)

    def test_good_values(self):
        rc, err = nginx_t(self.conf(
            "oip on; oip_upstream_inputs json; oip_max_json_size 1k; "
            "oip_max_tensor_size 1g; oip_max_depth 100000;"))
        self.assertEqual(rc, 0, err)


if __name__ == "__main__":
    run_tests()
