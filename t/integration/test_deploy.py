#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""The deployment files of docs/deploy/ hold together and run.

The Kubernetes manifests are parsed (YAML), their objects checked for
the fields Kubernetes requires and for the names they share (selectors
and pod labels, Services and container ports, volumes and ConfigMaps,
the HPA's target, the Ingress's and HTTPRoute's backend), and the
gateway containers against the nginx configuration they carry: each
port nginx listens on is a container port and back, each probe asks a
path nginx serves on that port, the sidecar's upstream is the runtime
container's port, the user is the image's, every path nginx writes is
mounted under a read-only root, the image is the package's version.

Then each ConfigMap's configuration runs as the image runs it (the
image's nginx.conf around it, docs/deploy/image/) with the built
module, in front of the example runtime: nginx -t passes, an inference
request is converted, and each probe is asked as the kubelet asks it.
A stopped runtime fails the sidecar's readiness and never its liveness.
The addresses are the only change: listen ports and upstreams become
this host's."""

import glob
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import (MODULE, ROOT, GatewayTestCase, Nginx, free_port,
                     heavy, run_tests, wait_for)
from test_examples import nginx_t
from test_sequence import doc as seq_doc
from test_signatures import Hooks

DEPLOY = os.path.join(ROOT, "docs", "deploy")
K8S = os.path.join(DEPLOY, "kubernetes")
IMAGE_DIR = os.path.join(DEPLOY, "image")

API = {
    "ConfigMap": "v1",
    "Service": "v1",
    "Deployment": "apps/v1",
    "HorizontalPodAutoscaler": "autoscaling/v2",
    "PodDisruptionBudget": "policy/v1",
    "Ingress": "networking.k8s.io/v1",
    "HTTPRoute": "gateway.networking.k8s.io/v1",
}

# the fields of a container and of a probe (core/v1): a misspelt one is
# dropped by a lenient apply and the probe silently never runs
CONTAINER_KEYS = {
    "name", "image", "command", "args", "workingDir", "ports", "env",
    "envFrom", "resources", "volumeMounts", "livenessProbe",
    "readinessProbe", "startupProbe", "lifecycle", "securityContext",
    "imagePullPolicy", "restartPolicy", "terminationMessagePath",
    "terminationMessagePolicy", "stdin", "tty", "volumeDevices",
    "resizePolicy",
}
PROBE_KEYS = {
    "httpGet", "tcpSocket", "exec", "grpc", "initialDelaySeconds",
    "periodSeconds", "timeoutSeconds", "failureThreshold",
    "successThreshold", "terminationGracePeriodSeconds",
}
HTTPGET_KEYS = {"path", "port", "host", "scheme", "httpHeaders"}

# what the image's nginx.conf and its Containerfile say
IMAGE_CONF = open(os.path.join(IMAGE_DIR, "nginx.conf")).read()
CONTAINERFILE = open(os.path.join(IMAGE_DIR, "Containerfile")).read()


def manifests():
    """{file name: [objects]} of docs/deploy/kubernetes/*.yaml"""
    out = {}
    for path in sorted(glob.glob(os.path.join(K8S, "*.yaml"))):
        with open(path) as f:
            out[os.path.basename(path)] = [d for d in yaml.safe_load_all(f)
                                           if d is not None]
    return out


def listens(conf):
    return sorted({int(p) for p in re.findall(r"^\s*listen\s+(\d+)\s*;",
                                              conf, re.M)})


def locations(conf):
    """{port: set of exact and prefix locations} of each server block"""
    out = {}
    for block in re.split(r"^\s*server\s*\{", conf, flags=re.M)[1:]:
        locs = set(re.findall(r"^\s*location\s+(?:=\s+)?(\S+)\s*\{", block,
                              re.M))
        for port in listens(block):
            out.setdefault(port, set()).update(locs)
    return out


def serves(locs, path):
    return any(path == l or (l.endswith("/") and path.startswith(l))
               for l in locs)


def package_version():
    with open(os.path.join(ROOT, "debian", "changelog")) as f:
        return re.match(r"\S+ \(([^)]+)\)", f.readline()).group(1)


def image_uid():
    return int(re.search(r"^USER\s+(\d+):\d+", CONTAINERFILE, re.M).group(1))


def pod_containers(dep):
    spec = dep["spec"]["template"]["spec"]
    return spec.get("initContainers", []) + spec["containers"]


def gateway_of(dep):
    """The container that runs nginx: the image's, as the image runs it
    (another container of the image, with a command, is a helper)."""
    for c in pod_containers(dep):
        if (c["image"].split("/")[-1].startswith("ngx-oip:")
                and "command" not in c):
            return c
    raise AssertionError("no gateway container in " + dep["metadata"]["name"])


def port_number(container, port):
    if isinstance(port, int):
        return port
    for p in container.get("ports", []):
        if p.get("name") == port:
            return p["containerPort"]
    raise AssertionError("%s: no port named %s" % (container["name"], port))


def gateway_conf(objs, dep):
    """The configuration the gateway container mounts into conf.d/."""
    c = gateway_of(dep)
    mount = [m for m in c["volumeMounts"]
             if m["mountPath"] == "/etc/nginx/conf.d"]
    assert len(mount) == 1, mount
    vols = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
    cm_name = vols[mount[0]["name"]]["configMap"]["name"]
    cms = [o for o in objs if o["kind"] == "ConfigMap"
           and o["metadata"]["name"] == cm_name]
    assert len(cms) == 1, cm_name
    return cms[0]["data"]


def stateful():
    """stateful.yaml's objects, Deployment, upstream generator container,
    its script and its environment."""
    objs = manifests()["stateful.yaml"]
    dep = [o for o in objs if o["kind"] == "Deployment"][0]
    gen = [c for c in pod_containers(dep) if "command" in c][0]
    path = gen["command"][-1]
    mount = [m for m in gen["volumeMounts"]
             if m["mountPath"] == os.path.dirname(path)][0]
    vol = [v for v in dep["spec"]["template"]["spec"]["volumes"]
           if v["name"] == mount["name"]][0]
    cm = [o for o in objs if o["kind"] == "ConfigMap"
          and o["metadata"]["name"] == vol["configMap"]["name"]][0]
    env = {e["name"]: e["value"] for e in gen["env"]}
    return objs, dep, gen, cm["data"][os.path.basename(path)], env


class Manifests(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.files = manifests()
        cls.all = [o for objs in cls.files.values() for o in objs]

    def objects(self, kind):
        return [o for o in self.all if o["kind"] == kind]

    def test_files(self):
        self.assertEqual(sorted(self.files), ["httproute.yaml",
                                              "ingress.yaml", "shared.yaml",
                                              "sidecar.yaml",
                                              "stateful.yaml"])
        for name, objs in self.files.items():
            for o in objs:
                with self.subTest(file=name, kind=o.get("kind")):
                    self.assertIn(o.get("kind"), API)
                    self.assertEqual(o.get("apiVersion"), API[o["kind"]])
                    self.assertRegex(o["metadata"]["name"],
                                     r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

    def test_deployments(self):
        deps = self.objects("Deployment")
        self.assertEqual(len(deps), 3)
        for dep in deps:
            name = dep["metadata"]["name"]
            with self.subTest(deployment=name):
                spec = dep["spec"]
                pod = spec["template"]["spec"]
                labels = spec["template"]["metadata"]["labels"]
                for k, v in spec["selector"]["matchLabels"].items():
                    self.assertEqual(labels.get(k), v)
                vols = {v["name"] for v in pod["volumes"]}
                for c in pod_containers(dep):
                    self.assertLessEqual(set(c), CONTAINER_KEYS, c["name"])
                    self.assertTrue(c["image"])
                    for m in c.get("volumeMounts", []):
                        self.assertIn(m["name"], vols)
                    for kind in ("livenessProbe", "readinessProbe",
                                 "startupProbe"):
                        if kind in c:
                            self.assertLessEqual(set(c[kind]), PROBE_KEYS)
                            if "exec" in c[kind]:
                                self.assertTrue(c[kind]["exec"]["command"])
                                continue
                            self.assertLessEqual(set(c[kind]["httpGet"]),
                                                 HTTPGET_KEYS)
                            port_number(c, c[kind]["httpGet"]["port"])
                confd = {m["name"] for c in pod_containers(dep)
                         for m in c.get("volumeMounts", [])
                         if m["mountPath"] == "/etc/nginx/conf.d"}
                for v in pod["volumes"]:
                    if "configMap" in v:
                        cm = [o for o in self.objects("ConfigMap")
                              if o["metadata"]["name"]
                              == v["configMap"]["name"]]
                        self.assertEqual(len(cm), 1, v)
                        # conf.d/*.conf: every key is included
                        for key in cm[0]["data"]:
                            if v["name"] in confd:
                                self.assertTrue(key.endswith(".conf"), key)

    def test_gateway_containers(self):
        uid = image_uid()
        version = package_version()
        admin = listens(IMAGE_CONF)
        for dep in self.objects("Deployment"):
            c = gateway_of(dep)
            conf = "\n".join(gateway_conf(self.all, dep).values())
            with self.subTest(deployment=dep["metadata"]["name"]):
                self.assertEqual(c["image"].split(":")[-1], version)
                # every port nginx listens on is declared, and only those
                ports = sorted(p["containerPort"] for p in c["ports"])
                self.assertEqual(ports, sorted(listens(conf) + admin))
                # probes ask what nginx serves on the port they ask
                locs = locations(conf)
                locs.update(locations(IMAGE_CONF))
                for kind in ("livenessProbe", "readinessProbe"):
                    get = c[kind]["httpGet"]
                    port = port_number(c, get["port"])
                    self.assertTrue(serves(locs[port], get["path"]),
                                    "%s %s:%s" % (kind, port, get["path"]))
                # liveness is the gateway's own, never the runtime's
                live = c["livenessProbe"]["httpGet"]
                self.assertIn(port_number(c, live["port"]), admin)
                # the image's user, checked by the kubelet
                sc = c["securityContext"]
                self.assertTrue(sc["runAsNonRoot"])
                self.assertEqual(sc["runAsUser"], uid)
                self.assertFalse(sc["allowPrivilegeEscalation"])
                # a read-only root: what nginx writes is mounted
                if sc.get("readOnlyRootFilesystem"):
                    mounts = [m["mountPath"] for m in c["volumeMounts"]
                              if not m.get("readOnly")]
                    pid = re.search(r"^pid\s+(\S+);", IMAGE_CONF,
                                    re.M).group(1)
                    for path in (os.path.dirname(pid), "/var/lib/nginx"):
                        self.assertIn(path, mounts)

    def test_sidecar(self):
        objs = self.files["sidecar.yaml"]
        dep = [o for o in objs if o["kind"] == "Deployment"][0]
        pod = dep["spec"]["template"]["spec"]
        gw = gateway_of(dep)
        # a native sidecar: an init container that keeps running
        self.assertIn(gw, pod["initContainers"])
        self.assertEqual(gw["restartPolicy"], "Always")
        # readiness through the gateway to the runtime's health
        ready = gw["readinessProbe"]["httpGet"]
        self.assertEqual(ready["path"], "/v2/health/ready")
        conf = "\n".join(gateway_conf(objs, dep).values())
        self.assertIn(port_number(gw, ready["port"]), listens(conf))
        # the gateway's upstream is the runtime container's port
        runtime = [c for c in pod["containers"] if c is not gw]
        self.assertEqual(len(runtime), 1)
        upstreams = set(re.findall(r"proxy_pass\s+http://127\.0\.0\.1:(\d+)",
                                   conf))
        ports = {str(p["containerPort"]) for p in runtime[0]["ports"]}
        self.assertEqual(upstreams, ports)

    def test_stateful(self):
        """The generator writes the file the upstream includes, where the
        gateway reads it, names the headless Service's pods and port, and
        signals the master whose pid file the image writes."""
        objs, dep, gen, script, env = stateful()
        pod = dep["spec"]["template"]["spec"]
        gw = gateway_of(dep)
        self.assertIsNot(gen, gw)
        self.assertTrue(pod["shareProcessNamespace"])
        # a native sidecar, before nginx, holding it back until the
        # first list is written
        self.assertEqual(pod["initContainers"], [gen])
        self.assertEqual(gen["restartPolicy"], "Always")
        self.assertEqual(gen["startupProbe"]["exec"]["command"],
                         ["test", "-s", env["UPSTREAM_FILE"]])
        # the file, in a volume both mount (the gateway only reads it)
        conf = "\n".join(gateway_conf(objs, dep).values())
        ups = re.search(r"upstream (\S+) \{(.*?)\n\}", conf, re.S)
        self.assertIn("include %s;" % env["UPSTREAM_FILE"], ups.group(2))
        self.assertIn("oip_sequence zone=", ups.group(2))
        self.assertEqual(set(re.findall(r"proxy_pass http://(\S+);", conf)),
                         {ups.group(1)})

        def mount(c, path):
            m = [m for m in c["volumeMounts"] if m["mountPath"] == path]
            self.assertEqual(len(m), 1, (c["name"], path))
            return m[0]
        d = os.path.dirname(env["UPSTREAM_FILE"])
        self.assertEqual(mount(gen, d)["name"], mount(gw, d)["name"])
        self.assertTrue(mount(gw, d).get("readOnly"))
        self.assertFalse(mount(gen, d).get("readOnly"))
        pid = re.search(r"^pid\s+(\S+);", IMAGE_CONF, re.M).group(1)
        self.assertEqual(env["NGINX_PID"], pid)
        d = os.path.dirname(pid)
        self.assertEqual(mount(gen, d)["name"], mount(gw, d)["name"])
        # the same user may signal nginx
        self.assertEqual(gen["securityContext"]["runAsUser"],
                         gw["securityContext"]["runAsUser"])
        # the headless Service of the runtime pods, on their port
        name, ns = env["RUNTIME_SERVICE"].split(".")[:2]
        self.assertEqual(env["RUNTIME_SERVICE"],
                         "%s.%s.svc.cluster.local" % (name, ns))
        svc = [o for o in objs if o["kind"] == "Service"
               and o["metadata"]["name"] == name]
        self.assertEqual(len(svc), 1)
        self.assertEqual(svc[0]["metadata"]["namespace"], ns)
        self.assertEqual(svc[0]["spec"]["clusterIP"], "None")
        self.assertEqual([p["port"] for p in svc[0]["spec"]["ports"]],
                         [int(env["RUNTIME_PORT"])])
        self.assertTrue(script.startswith("#!/bin/sh\n"))

    def test_services_and_routes(self):
        deps = self.objects("Deployment")
        # the gateways' Services; a headless one lists runtime pods
        services = [s for s in self.objects("Service")
                    if s["spec"].get("clusterIP") != "None"]
        self.assertEqual(len(services), 3)
        for svc in services:
            with self.subTest(service=svc["metadata"]["name"]):
                sel = svc["spec"]["selector"]
                dep = [d for d in deps if all(
                    d["spec"]["template"]["metadata"]["labels"].get(k) == v
                    for k, v in sel.items())]
                self.assertEqual(len(dep), 1)
                gw = gateway_of(dep[0])
                for p in svc["spec"]["ports"]:
                    # the Service leads to the gateway, not the runtime
                    self.assertIn(port_number(gw, p["targetPort"]),
                                  listens(IMAGE_CONF + "\n".join(
                                      gateway_conf(self.all, dep[0])
                                      .values())))
                    self.assertNotIn(port_number(gw, p["targetPort"]),
                                     listens(IMAGE_CONF))

        shared = [s for s in services
                  if s["metadata"]["name"] == "oip-gateway"][0]
        ing = self.objects("Ingress")[0]
        for rule in ing["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                self.assertIn(path["pathType"], ("Prefix", "Exact",
                                                 "ImplementationSpecific"))
                self.assertEqual(path["path"], "/v2")
                be = path["backend"]["service"]
                self.assertEqual(be["name"], "oip-gateway")
                self.assertIn(be["port"]["name"],
                              [p["name"] for p in shared["spec"]["ports"]])
        route = self.objects("HTTPRoute")[0]
        self.assertTrue(route["spec"]["parentRefs"])
        for rule in route["spec"]["rules"]:
            for m in rule["matches"]:
                self.assertEqual(m["path"], {"type": "PathPrefix",
                                             "value": "/v2"})
            for be in rule["backendRefs"]:
                self.assertEqual(be["name"], "oip-gateway")
                self.assertIn(be["port"], [p["port"] for p in
                                           shared["spec"]["ports"]])

    def test_hpa_and_pdb(self):
        hpa = self.objects("HorizontalPodAutoscaler")[0]
        ref = hpa["spec"]["scaleTargetRef"]
        dep = [d for d in self.objects("Deployment")
               if d["metadata"]["name"] == ref["name"]]
        self.assertEqual((ref["kind"], ref["apiVersion"], len(dep)),
                         ("Deployment", "apps/v1", 1))
        self.assertLessEqual(hpa["spec"]["minReplicas"],
                             hpa["spec"]["maxReplicas"])
        # Utilization is of the request: the container must make one
        for m in hpa["spec"]["metrics"]:
            res = m["resource"]["name"]
            self.assertIn(res, gateway_of(dep[0])["resources"]["requests"])
        pdb = self.objects("PodDisruptionBudget")[0]
        self.assertEqual(pdb["spec"]["selector"]["matchLabels"],
                         dep[0]["spec"]["selector"]["matchLabels"])


def image_nginx_conf(conf_d, port, admin):
    """The image's nginx.conf as this test runs it: the module loaded by
    hand (the package's modules-enabled is not here), files in the test's
    prefix, the admin port a free one."""
    text = IMAGE_CONF
    for old, new in (
            ("include /etc/nginx/modules-enabled/*.conf;",
             "load_module @MODULE@;"),
            ("pid /tmp/nginx.pid;", "pid @DIR@/nginx.pid;"),
            ("error_log stderr notice;", "error_log @DIR@/error.log notice;"),
            ("access_log /dev/stdout oip;",
             "access_log @DIR@/access.log oip;"),
            ("listen 9145;", "listen 127.0.0.1:%d;" % admin),
            ("include /etc/nginx/conf.d/*.conf;",
             "include %s/*.conf;" % conf_d)):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def localize(conf, port, rt_port):
    """The gateway's listen and upstream addresses made this host's
    (rt_port None: the upstream's servers are in a generated file)."""
    out, n = re.subn(r"listen 8080;", "listen 127.0.0.1:%d;" % port, conf)
    assert n == 1, conf
    if rt_port is None:
        return out
    out, n = re.subn(r"(127\.0\.0\.1|[a-z0-9.-]+\.svc\.cluster\.local):8000",
                     "127.0.0.1:%d" % rt_port, out)
    assert n >= 1, conf
    return out


def read(path):
    with open(path) as f:
        return f.read()


def replace_once(text, edits):
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


class Run(GatewayTestCase):
    """Each ConfigMap (and the image's default) inside the image's
    nginx.conf, running."""

    @classmethod
    def setUpGateway(cls):
        cls.rt = cls.start_runtime("triton")

    def run_conf(self, confs, rt_port=None, check=True, generated=False,
                 edits=()):
        """nginx -t, then nginx, on the image's nginx.conf with CONFS in
        its conf.d/ (generated: their upstreams' servers are included
        from a file; edits: (old, new) of the image's nginx.conf)."""
        d = tempfile.mkdtemp(prefix="oip-conf.d-")
        self.addCleanup(shutil.rmtree, d, True)
        port, admin = free_port(), free_port()
        for name, text in confs.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(localize(text, port, None if generated
                                 else rt_port or self.rt.port))
        # the test's own temp paths (the image's are /var/lib/nginx)
        with open(os.path.join(d, "zz-test-paths.conf"), "w") as f:
            f.write("".join("%s_temp_path %s/%s;\n" % (k, d, k) for k in
                            ("client_body", "proxy", "fastcgi", "uwsgi",
                             "scgi")))
        conf = replace_once(image_nginx_conf(d, port, admin), edits)
        rc, err = nginx_t(conf.replace("@MODULE@", MODULE)
                          .replace("@DIR@", d), "daemon off;")
        self.assertEqual(rc, 0, err)
        ngx = Nginx("", conf=conf, port=port)
        if check:
            self.addCleanup(lambda: self.assertEqual(ngx.stop(), []))
        else:
            self.addCleanup(ngx.stop)
        ngx.admin = admin
        return ngx

    def get(self, port, path):
        """(status, body) of a GET, as the kubelet's httpGet asks."""
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            conn.request("GET", path,
                         headers={"User-Agent": "kube-probe/1.31"})
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def probe(self, port, path):
        """The kubelet's httpGet: success is 200 to 399."""
        return 200 <= self.get(port, path)[0] < 400

    def check_gateway(self, ngx):
        st, _, body = ngx.post("/v2/models/identity/infer", json.dumps(
            {"inputs": [{"name": "INPUT0", "datatype": "FP16",
                         "shape": [2], "data": [0.5, -1]}]}))
        self.assertEqual(st, 200, body)
        self.assertEqual(json.loads(body)["outputs"][0]["data"], [0.5, -1.0])
        st, _, body = ngx.request("GET", "/v2")
        self.assertEqual(st, 200, body)
        st, _, body = ngx.request("GET", "/metrics")   # not on the gateway
        self.assertNotEqual(st, 200)

    def check_probes(self, ngx, dep):
        c = gateway_of(dep)
        ports = {8080: ngx.port, 9145: ngx.admin}
        for kind in ("readinessProbe", "livenessProbe"):
            get = c[kind]["httpGet"]
            self.assertTrue(self.probe(
                ports[port_number(c, get["port"])], get["path"]), kind)
        # Prometheus, on the image's port; the infer above is counted in
        # its log phase, after its answer, by whichever worker had it
        want = b'oip_requests_total{model="identity"'
        self.assertIn(want, wait_for(lambda: self.get(ngx.admin,
                                                      "/metrics")[1],
                                     lambda body: want in body))

    def test_sidecar(self):
        objs = manifests()["sidecar.yaml"]
        dep = [o for o in objs if o["kind"] == "Deployment"][0]
        ngx = self.run_conf(gateway_conf(objs, dep))
        self.check_gateway(ngx)
        self.check_probes(ngx, dep)

    def test_sidecar_runtime_down(self):
        """A runtime still loading (here: not up at all) keeps the pod
        unready and the gateway alive: nothing restarts it."""
        objs = manifests()["sidecar.yaml"]
        dep = [o for o in objs if o["kind"] == "Deployment"][0]
        c = gateway_of(dep)
        # a port with nobody on it
        ngx = self.run_conf(gateway_conf(objs, dep), rt_port=free_port(),
                            check=False)
        ready = c["readinessProbe"]["httpGet"]
        live = c["livenessProbe"]["httpGet"]
        self.assertFalse(self.probe(ngx.port, ready["path"]))
        self.assertTrue(self.probe(ngx.admin, live["path"]))

    def test_shared(self):
        objs = manifests()["shared.yaml"]
        dep = [o for o in objs if o["kind"] == "Deployment"][0]
        ngx = self.run_conf(gateway_conf(objs, dep))
        self.check_gateway(ngx)
        self.check_probes(ngx, dep)

    @heavy
    def test_stateful(self):
        """The stateful gateway as its pod runs it: the generator's own
        script, asking a DNS of the test's (a getent that lists the
        headless Service's pods: runtimes on 127.0.0.2, .3 and .4, one
        port); nginx started once the first list is written, as the
        startup probe holds it, and reloaded by the script when the list
        changes.  A pod that comes moves no sequence and takes new ones;
        a pod that goes loses its own (the documented 503) and no other;
        no pod at all keeps the last list."""
        objs, dep, gen, script, env = stateful()
        d = tempfile.mkdtemp(prefix="oip-stateful-")
        self.addCleanup(shutil.rmtree, d, True)
        port = free_port()
        hosts = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
        rts = [self.start_runtime(host=h, port=port) for h in hosts]
        pods = os.path.join(d, "pods")

        def publish(ready):
            with open(pods + ".new", "w") as f:
                f.write("".join(h + "\n" for h in ready))
            os.rename(pods + ".new", pods)
        publish(hosts[:2])
        # getent ahosts as glibc prints it: three lines an address
        os.mkdir(os.path.join(d, "bin"))
        getent = os.path.join(d, "bin", "getent")
        with open(getent, "w") as f:
            f.write("""#!/bin/sh
[ "$1" = ahosts ] && [ "$2" = "%s" ] || exit 2
[ -s %s ] || exit 2
while read -r a; do
    printf '%%-15s STREAM %%s\\n%%-15s DGRAM  \\n%%-15s RAW    \\n' \\
        "$a" "$2" "$a" "$a"
done < %s
""" % (env["RUNTIME_SERVICE"], pods, pods))
        os.chmod(getent, 0o755)
        servers = os.path.join(d, "upstreams",
                               os.path.basename(env["UPSTREAM_FILE"]))
        os.mkdir(os.path.dirname(servers))
        pid = os.path.join(d, "nginx.pid")
        path = os.path.join(d, "generate-upstream.sh")
        with open(path, "w") as f:
            f.write(script)
        log = os.path.join(d, "generator.log")
        with open(log, "w") as out:
            proc = subprocess.Popen(
                ["/bin/sh", path], stdout=subprocess.DEVNULL, stderr=out,
                env=dict(os.environ, RUNTIME_SERVICE=env["RUNTIME_SERVICE"],
                         RUNTIME_PORT=str(port), UPSTREAM_FILE=servers,
                         NGINX_PID=pid, INTERVAL="0.1",
                         PATH=os.path.dirname(getent) + ":"
                         + os.environ["PATH"]))
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)

        def lines(ready):
            return "".join("server %s:%d;\n" % (h, port) for h in ready)

        def listed(ready):
            return wait_for(lambda: os.path.exists(servers)
                            and read(servers),
                            lambda text: text == lines(ready))
        # the startup probe: nginx waits for the first list
        self.assertEqual(listed(hosts[:2]), lines(hosts[:2]))
        conf = "\n".join(gateway_conf(objs, dep).values())
        conf = replace_once(conf, [("include %s;" % env["UPSTREAM_FILE"],
                                    "include %s;" % servers)])
        ngx = self.run_conf({"gateway.conf": conf}, generated=True, edits=[
            ("worker_processes auto;", "worker_processes 2;"),
            ("pid @DIR@/nginx.pid;", "pid %s;" % pid)])

        def reloads(k):
            """k reloads done, every old worker gone"""
            def count():
                text = ngx.log()
                return (text.count(": reconfiguring\n"),
                        text.count(" exited with code "))
            self.assertEqual(wait_for(count, lambda c: c == (k, 2 * k)),
                             (k, 2 * k), ngx.log())
        # a master the generator has not told yet is told once
        reloads(1)

        def where(i):
            out = {}
            for a in Hooks(port, hosts[i]).call("GET",
                                                "arrivals")["identity"]:
                sid = a["parameters"]["sequence_id"]
                out.setdefault(sid, set()).add(i)
            return out

        def seen(among):
            out = {}
            for i in among:
                for sid, on in where(i).items():
                    out.setdefault(sid, set()).update(on)
            return out

        def send(sid, k, start=False, end=False):
            return ngx.post("/v2/models/identity/infer",
                            seq_doc(sid, start, end, k))
        for sid in range(1, 25):
            st, _, out = send(sid, 0, start=True)
            self.assertEqual(st, 200, out)
        before = seen((0, 1))
        self.assertEqual(set(before), set(range(1, 25)))
        self.assertEqual({len(v) for v in before.values()}, {1})
        # a third pod is ready: the list grows, nginx reloads
        publish(hosts)
        listed(hosts)
        reloads(2)
        for sid in range(1, 25):
            st, _, out = send(sid, 1)
            self.assertEqual(st, 200, out)
        for sid in range(100, 130):
            st, _, out = send(sid, 0, start=True, end=True)
            self.assertEqual(st, 200, out)
        after = seen((0, 1, 2))
        for sid in range(1, 25):
            self.assertEqual(after[sid], before[sid], sid)
        self.assertIn({2}, [after[sid] for sid in range(100, 130)])
        # the first pod goes: its sequences are lost, the others go on
        on0 = {sid for sid in range(1, 25) if before[sid] == {0}}
        self.assertTrue(on0 and len(on0) < 24, before)
        rts[0].stop()
        publish(hosts[1:])
        listed(hosts[1:])
        reloads(3)
        for sid in range(1, 25):
            st, _, out = send(sid, 2, end=True)
            if sid in on0:
                self.assertEqual(st, 503, out)
                self.assertEqual(json.loads(out)["error"],
                                 "sequence %d of model identity: its "
                                 "runtime is unavailable; start a new "
                                 "sequence" % sid)
            else:
                self.assertEqual(st, 200, out)
        last = seen((1, 2))
        for sid in set(range(1, 25)) - on0:
            self.assertEqual(last[sid], before[sid], sid)
        # no ready pod: nginx keeps the last list, and no reload
        publish([])
        wait_for(lambda: read(log),
                 lambda text: "has no ready pod" in text)
        self.assertEqual(read(servers), lines(hosts[1:]))
        st, _, out = send(100, 0, start=True, end=True)
        self.assertEqual(st, 200, out)
        self.assertEqual(ngx.log().count(": reconfiguring\n"), 3)

    def test_image_default(self):
        with open(os.path.join(IMAGE_DIR, "gateway.conf")) as f:
            ngx = self.run_conf({"gateway.conf": f.read()})
        self.check_gateway(ngx)


if __name__ == "__main__":
    run_tests()
