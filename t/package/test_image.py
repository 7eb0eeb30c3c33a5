#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""The container image (docs/deploy/image/Containerfile), built with
podman from a Debian 12 base made from the archive (mmdebstrap | podman
import, in place of docker.io's debian:bookworm-slim) and the package
./build.sh deb built, then run as a user runs it: ports published, the
gateway's configuration mounted read-only, and a curl through it to the
example runtime on this host.  Run by ./build.sh image, which gives the
tag to keep the image under in OIP_IMAGE_TAG: it is kept only when
every test passed.

This machine is itself a sandboxed container (gVisor, cgroup v1): crun
refuses it, and podman's default ulimits are above what it may set.  The
test gives podman its own containers.conf (runc, ulimits within the
sandbox's); a normal host needs none of it."""

import glob
import http.client
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import PYTHON, ROOT, RUNTIME, free_port, wait_for, wait_port

SOURCES = "/etc/apt/sources.list.d/debian.sources"
BASE = "localhost/oip-test-debian:bookworm"
IMAGE = "localhost/ngx-oip:test"
KEEP = os.environ.get("OIP_IMAGE_TAG")
CONTAINERFILE = os.path.join(ROOT, "docs", "deploy", "image",
                             "Containerfile")

# the gateway a user mounts: the runtime is on the host, seen from the
# container's network as host.containers.internal
GATEWAY = """
server {
    listen 8080;

    location /v2/ {
        oip on;
        oip_upstream_inputs binary;
        oip_upstream_outputs binary;
        proxy_pass http://host.containers.internal:%(rt)d;
    }
}
"""

FP16 = {"inputs": [{"name": "INPUT0", "datatype": "FP16", "shape": [3],
                    "data": [1.0, 0.5, -2]}]}


def podman(*args, check=True, **kw):
    r = subprocess.run(["podman"] + list(args), capture_output=True,
                       text=True, **kw)
    if check and r.returncode != 0:
        raise AssertionError("podman %s: %s%s"
                             % (" ".join(args), r.stdout, r.stderr))
    return r


def find_key(obj, key):
    """The first value of KEY anywhere in OBJ (podman's inspect nests
    docker-format fields in more than one place)."""
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        obj = list(obj.values())
    if isinstance(obj, list):
        for v in obj:
            found = find_key(v, key)
            if found is not None:
                return found
    return None


def request(port, method, path, body=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body, headers or {})
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


class Image(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        debs = glob.glob(os.path.join(ROOT, "build",
                                      "libnginx-mod-http-oip_*.deb"))
        if len(debs) != 1:
            raise unittest.SkipTest("./build.sh deb builds the package "
                                    "(one, the image takes it): %s" % debs)
        cls.tmp = tempfile.mkdtemp(prefix="oip-image-")
        conf = os.path.join(cls.tmp, "containers.conf")
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        with open(conf, "w") as f:
            f.write('[containers]\ndefault_ulimits = ["nofile=%d:%d", '
                    '"nproc=4096:4096"]\n[engine]\nruntime = "runc"\n'
                    % (nofile, nofile))
        os.environ["CONTAINERS_CONF"] = conf

        # the base: Debian 12 from the archive, as debian:bookworm-slim
        mm = subprocess.Popen(["mmdebstrap", "--variant=apt", "bookworm",
                               "-", SOURCES], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
        imp = subprocess.run(["podman", "import", "-", BASE], stdin=mm.stdout,
                             capture_output=True)
        mm.stdout.close()
        if mm.wait() != 0 or imp.returncode != 0:
            raise AssertionError("base image: %s" % imp.stderr)

        # as the Containerfile's header says a user builds it
        podman("build", "--format", "docker", "--build-arg", "BASE=" + BASE,
               "-f", CONTAINERFILE, "-t", IMAGE, ROOT)
        cls.passed = 0
        cls.inspect = json.loads(podman("image", "inspect", IMAGE).stdout)[0]

    @classmethod
    def tearDownClass(cls):
        if KEEP and cls.passed == 2:
            podman("tag", IMAGE, KEEP)
        podman("rmi", IMAGE, BASE, check=False)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_gateway(self, *args):
        """A detached gateway container, removed after the test; the
        healthcheck's timer off (no systemd here), run by hand."""
        name = "oip-test-%d" % free_port()
        podman("run", "-d", "--name", name, "--health-interval", "disable",
               *args, IMAGE)
        self.addCleanup(podman, "rm", "-f", "-t", "0", name, check=False)
        return name

    def wait_healthy(self, port, timeout=30):
        """The published port answers as soon as podman binds it, before
        nginx listens: wait for an answer, not for a connection."""
        deadline = time.time() + timeout
        while True:
            try:
                if request(port, "GET", "/healthz")[0] == 200:
                    return
            except (OSError, http.client.HTTPException):
                pass
            if time.time() > deadline:
                self.fail("the gateway did not come up on %d" % port)
            time.sleep(0.2)

    def test_image(self):
        cfg = self.inspect["Config"]
        self.assertEqual(cfg["User"], "33:33")          # www-data
        self.assertEqual(sorted(cfg["ExposedPorts"]), ["8080/tcp",
                                                       "9145/tcp"])
        self.assertEqual(cfg["StopSignal"], "SIGQUIT")
        hc = find_key(self.inspect, "Healthcheck")
        self.assertIsNotNone(hc, "no HEALTHCHECK: built without "
                             "--format docker?")
        self.assertIn("http://127.0.0.1:9145/healthz", " ".join(hc["Test"]))
        # the module enabled by the package, as on a Debian host
        r = podman("run", "--rm", IMAGE, "readlink",
                   "/etc/nginx/modules-enabled/50-mod-http-oip.conf")
        self.assertEqual(
            r.stdout.strip(),
            "/usr/share/nginx/modules-available/mod-http-oip.conf")
        # the image's own configuration is sound as it stands
        r = podman("run", "--rm", IMAGE, "nginx", "-e", "stderr", "-t",
                   check=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        Image.passed += 1

    def test_gateway(self):
        rt = subprocess.Popen(
            [PYTHON, RUNTIME, "--host", "0.0.0.0", "--port", str(free_port()),
             "--family", "triton"], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        self.addCleanup(rt.wait)
        self.addCleanup(rt.terminate)
        rt_port = int(rt.args[rt.args.index("--port") + 1])
        wait_port(rt_port, rt)

        confd = os.path.join(self.tmp, "conf.d")
        os.makedirs(confd, exist_ok=True)
        with open(os.path.join(confd, "gateway.conf"), "w") as f:
            f.write(GATEWAY % {"rt": rt_port})
        gw, admin = free_port(), free_port()
        name = self.run_gateway("-p", "127.0.0.1:%d:8080" % gw,
                                "-p", "127.0.0.1:%d:9145" % admin,
                                "-v", confd + ":/etc/nginx/conf.d:ro")
        self.wait_healthy(admin)

        # liveness: nginx alone, the healthcheck the image declares
        st, _, body = request(admin, "GET", "/healthz")
        self.assertEqual((st, body), (200, b"ok\n"))
        self.assertEqual(podman("healthcheck", "run", name,
                                check=False).returncode, 0)

        # FP16 as JSON: the runtime (Triton's rules) takes it only as
        # binary and answers only so; the module in the image did both
        st, hdrs, body = request(gw, "POST", "/v2/models/identity/infer",
                                 json.dumps(FP16))
        self.assertEqual(st, 200, body)
        self.assertEqual(json.loads(body)["outputs"][0]["data"],
                         [1.0, 0.5, -2.0])
        # a bad request: the module's JSON 400, from the edge
        st, _, body = request(gw, "POST", "/v2/models/identity/infer",
                              b'{"inputs": [')
        self.assertEqual(st, 400)
        self.assertIn("error", json.loads(body))

        # Prometheus on the image's port counts what went through, once
        # the request's log phase has run (after its answer)
        want = (b'oip_requests_total{model="identity",'
                b'outcome="converted",code="200"} 1')
        st, _, body = wait_for(lambda: request(admin, "GET", "/metrics"),
                               lambda r: want in r[2])
        self.assertEqual(st, 200)
        self.assertIn(want, body)

        # non-root: the master and every worker
        ps = podman("exec", name, "sh", "-c",
                    "grep -h '^Uid:' /proc/[0-9]*/status").stdout
        uids = {line.split()[1] for line in ps.splitlines()}
        self.assertEqual(uids, {"33"})

        # logs: the access log on stdout (one JSON object a line), the
        # error log on stderr
        logs = podman("logs", name)
        access = [json.loads(l) for l in logs.stdout.splitlines()
                  if l.startswith("{")]
        self.assertIn(("identity", 200, "json", "binary"),
                      [(a["model"], a["status"], a["in"], a["upstream"])
                       for a in access])
        self.assertIn("start worker process", logs.stderr)
        self.assertNotIn("[emerg]", logs.stderr)
        self.assertNotIn("[alert]", logs.stderr)

        # the mounted configuration changed, then reloaded in place
        with open(os.path.join(confd, "gateway.conf"), "a") as f:
            f.write("server {\n    listen 8080;\n    server_name reloaded;"
                    "\n    return 418;\n}\n")
        podman("exec", name, "nginx", "-s", "reload")
        deadline = time.time() + 15
        while True:
            st, _, _ = request(gw, "GET", "/", headers={"Host": "reloaded"})
            if st == 418 or time.time() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual(st, 418)

        # SIGQUIT: a graceful stop, exit status 0
        podman("stop", "-t", "20", name)
        state = json.loads(podman("inspect", name).stdout)[0]["State"]
        self.assertEqual(state["ExitCode"], 0)
        Image.passed += 1


if __name__ == "__main__":
    unittest.main(verbosity=2)
