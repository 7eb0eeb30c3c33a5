#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""The Debian package in a clean Debian 12 root, not on this system: a
minimal bookworm root with nginx from the archive (mmdebstrap), the
package installed there with apt-get install ./...deb, nginx -t passing
with the module enabled by the package alone (no load_module written by
hand), a JSON request converted through that nginx in front of the
example runtime, and apt-get purge removing every file the package
installed.  Run by ./build.sh deb, after the package is built; the root
needs the Debian mirror and about a minute."""

import glob
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import ROOT, Runtime, free_port, wait_port

SOURCES = "/etc/apt/sources.list.d/debian.sources"

# the root's nginx.conf: Debian's include of modules-enabled, nothing
# loaded by hand
CONF = """
user www-data;
worker_processes 1;
pid /run/nginx-test.pid;
include /etc/nginx/modules-enabled/*.conf;

events {
    worker_connections 64;
}

http {
    access_log off;
    error_log /var/log/nginx/test-error.log info;

    server {
        listen 127.0.0.1:%(port)d;

        location /v2/ {
            oip on;
            oip_upstream_inputs binary;
            oip_upstream_outputs binary;
            proxy_pass http://127.0.0.1:%(rt)d;
        }
    }
}
"""


def run(root, *cmd, check=True):
    r = subprocess.run(["chroot", root] + list(cmd), capture_output=True,
                       text=True, env=dict(os.environ,
                                           DEBIAN_FRONTEND="noninteractive"))
    if check and r.returncode != 0:
        raise AssertionError("%s: %s%s" % (" ".join(cmd), r.stdout, r.stderr))
    return r


class Install(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        debs = sorted(glob.glob(os.path.join(
            ROOT, "build", "libnginx-mod-http-oip_*.deb")))
        if not debs:
            raise unittest.SkipTest("no package: ./build.sh deb builds it")
        cls.deb = debs[-1]
        cls.root = tempfile.mkdtemp(prefix="oip-root-")
        subprocess.run(["mmdebstrap", "--variant=apt", "--include=nginx",
                        "bookworm", cls.root, SOURCES], check=True,
                       capture_output=True)
        # /proc for nginx's workers and dpkg's scripts
        subprocess.run(["mount", "-t", "proc", "proc",
                        os.path.join(cls.root, "proc")], check=True)

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["umount", os.path.join(cls.root, "proc")])
        shutil.rmtree(cls.root, ignore_errors=True)

    def test_install_convert_purge(self):
        root = self.root
        name = os.path.basename(self.deb)
        shutil.copy(self.deb, os.path.join(root, "tmp", name))
        before = set(run(root, "find", "/", "-xdev").stdout.split())

        run(root, "apt-get", "install", "-y", "--no-install-recommends",
            "/tmp/" + name)
        files = run(root, "dpkg", "-L", "libnginx-mod-http-oip").stdout.split()
        self.assertIn("/usr/lib/nginx/modules/ngx_http_oip_module.so", files)
        link = os.path.join(root, "etc/nginx/modules-enabled",
                            "50-mod-http-oip.conf")
        self.assertEqual(os.readlink(link),
                         "/usr/share/nginx/modules-available/mod-http-oip.conf")
        # the stock configuration, the module enabled by the package
        t = run(root, "nginx", "-t", check=False)
        self.assertEqual(t.returncode, 0, t.stderr)
        # and with a gateway in conf.d/, as docs/deploy/README.md says
        gw = os.path.join(root, "etc/nginx/conf.d/oip-gateway.conf")
        shutil.copy(os.path.join(ROOT, "docs", "deploy", "image",
                                 "gateway.conf"), gw)
        t = run(root, "nginx", "-t", check=False)
        os.unlink(gw)
        self.assertEqual(t.returncode, 0, t.stderr)

        rt = Runtime("triton")
        port = free_port()
        try:
            with open(os.path.join(root, "etc/nginx/test.conf"), "w") as f:
                f.write(CONF % {"port": port, "rt": rt.port})
            proc = subprocess.Popen(
                ["chroot", root, "nginx", "-c", "/etc/nginx/test.conf",
                 "-g", "daemon off;"], stderr=subprocess.DEVNULL)
            try:
                wait_port(port, proc)
                conn = http.client.HTTPConnection("127.0.0.1", port,
                                                  timeout=30)
                self.addCleanup(conn.close)
                # FP16 as JSON: the runtime (Triton's rules) takes it only
                # as binary, and answers it only so: the module did both
                conn.request("POST", "/v2/models/identity/infer", json.dumps(
                    {"inputs": [{"name": "INPUT0", "datatype": "FP16",
                                 "shape": [3], "data": [1.0, 0.5, -2]}]}))
                r = conn.getresponse()
                body = r.read()
                self.assertEqual(r.status, 200, body)
                self.assertEqual(r.getheader("Content-Type"),
                                 "application/json")
                self.assertEqual(json.loads(body)["outputs"][0]["data"],
                                 [1.0, 0.5, -2.0])
            finally:
                proc.terminate()
                proc.wait(10)
        finally:
            rt.stop()
            os.unlink(os.path.join(root, "etc/nginx/test.conf"))

        run(root, "apt-get", "purge", "-y", "libnginx-mod-http-oip")
        self.assertFalse(os.path.lexists(link))
        for path in map(os.path.normpath, files):
            if path in before:
                continue        # a directory others own (/usr/lib/nginx)
            self.assertFalse(os.path.lexists(root + path), path)
        # nothing new but what dpkg, apt and nginx's own run keep
        after = set(run(root, "find", "/", "-xdev").stdout.split())
        left = sorted(p for p in after - before
                      if not p.startswith(("/var/lib/dpkg", "/var/lib/apt",
                                           "/var/cache", "/var/lib/nginx",
                                           "/var/log", "/run", "/tmp")))
        self.assertEqual(left, [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
