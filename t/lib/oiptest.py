#
# Copyright (C) ngx_oip_module authors
#
"""The integration test harness: real nginx with the built module, the
example runtime, and a recording upstream, all on 127.0.0.1.

Each test class gets its own nginx prefix directory and ports.  When a
class ends, its error log must hold no [alert], [emerg] or [crit], no
worker that exited on a signal and no sanitizer report.
"""

import http.client
import inspect
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
MODULE = os.environ.get("OIP_MODULE",
                        os.path.join(ROOT, "build", "ngx_http_oip_module.so"))
NGINX = os.environ.get("OIP_NGINX", "/usr/sbin/nginx")
RUNTIME = os.path.join(ROOT, "t", "runtime", "oip_runtime.py")
GRPC_RUNTIME = os.path.join(ROOT, "t", "runtime", "oip_grpc_runtime.py")
PYTHON = "/usr/bin/python3"
IHCL = "Inference-Header-Content-Length"

# extra environment for nginx, e.g. LD_PRELOAD for sanitizer runs
NGINX_ENV = json.loads(os.environ.get("OIP_NGINX_ENV", "{}"))
# a wrapper command, e.g. valgrind, as a JSON list; %DIR% is the prefix
NGINX_WRAP = json.loads(os.environ.get("OIP_NGINX_WRAP", "[]"))
# nginx as one process (master_process off), as valgrind wants it
SINGLE = os.environ.get("OIP_NGINX_SINGLE") == "1"
# how much slower than usual nginx may be
SLOW = 20 if NGINX_WRAP else 1
# the pass of the test matrix (t/run.sh): plain, next, asan, valgrind
PASS = os.environ.get("OIP_PASS", "plain")
# a test that is heavy or measures time runs in the plain pass only
plain_only = unittest.skipUnless(PASS == "plain", "the plain pass only")
# ./build.sh check, the edit-test loop: tests of seconds of sleep (kills,
# reloads, a zone filled) wait for ./build.sh test's plain pass
QUICK = os.environ.get("OIP_QUICK") == "1"
heavy = unittest.skipUnless(PASS == "plain" and not QUICK,
                            "./build.sh test's plain pass only")
# ... and tests that wait a second or two by design (a slow runtime, a
# timer, a reload): every pass of ./build.sh test runs them, the check not
unhurried = unittest.skipIf(QUICK, "./build.sh test only: it waits")

# valgrind runs --quiet: any line it writes is an error it found
BAD_LOG = re.compile(r"\[(alert|emerg|crit)\]|exited on signal|"
                     r"AddressSanitizer|LeakSanitizer|runtime error:|"
                     r"^==\d+== \S", re.M)


# OIP_GOLDEN_DIR: every POST is written to DIR/N.rest and carries
# X-Oip-Golden: N, which the gRPC runtime writes its ModelInferRequest
# and its answer under (DIR/N.pb, DIR/N.answer.pb); what the client got
# goes to DIR/N.client: t/unit/golden/take.py makes the golden cases
GOLDEN = os.environ.get("OIP_GOLDEN_DIR")
golden_count = [0]


def golden_request(path, headers, body):
    golden_count[0] += 1
    n = "%d%05d" % (os.getpid(), golden_count[0])
    headers = dict(headers or {}, **{"X-Oip-Golden": n})
    if isinstance(body, str):
        body = body.encode()
    # the test that sent it, for the case's name
    test = next((f.function for f in inspect.stack()
                 if f.function.startswith("test_")), "unknown")
    with open(os.path.join(GOLDEN, n + ".rest"), "w") as f:
        json.dump({"path": path, "headers": headers, "test": test,
                   "body": (body or b"").hex()}, f)
    return headers


def golden_answer(headers, out):
    """What the client got, beside its request: DIR/N.client."""
    status, hdrs, body = out
    with open(os.path.join(GOLDEN, headers["X-Oip-Golden"] + ".client"),
              "w") as f:
        json.dump({"status": status, "headers": hdrs, "body": body.hex()},
                  f)


# the ports handed out: the kernel may give a closed one again at once
handed_out = set()


def free_port():
    while True:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if port not in handed_out:
            handed_out.add(port)
            return port


def wait_port(port, proc=None, timeout=15, host="127.0.0.1"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError("process exited with %s" % proc.returncode)
        try:
            socket.create_connection((host, port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nothing listens on port %d" % port)


def wait_for(fn, done=bool, timeout=10):
    """fn()'s value once done(value) holds, or its last value after
    timeout * SLOW seconds.  For what happens after a client has its
    answer: a request's log phase (counting, the access log) runs once
    the answer is sent, in whichever worker had it, and a background
    fetch ends when it ends.  A test waits for it; it never assumes it."""
    deadline = time.time() + timeout * SLOW
    while True:
        value = fn()
        if done(value) or time.time() > deadline:
            return value
        time.sleep(0.05)


class Runtime:
    """The example runtime as its own process."""

    def __init__(self, family="triton", args=(), host="127.0.0.1",
                 port=None):
        self.host = host
        self.port = port or free_port()
        self.proc = subprocess.Popen(
            [PYTHON, RUNTIME, "--host", host, "--port", str(self.port),
             "--family", family] + list(args),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_port(self.port, self.proc, host=host)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stderr.close()


class GrpcRuntime:
    """The example gRPC runtime as its own process: port, its gRPC port;
    hook(), its HTTP test hooks."""

    STUBS = os.path.join(tempfile.gettempdir(), "oip-grpc-stubs-%d"
                         % os.getuid())

    def __init__(self, args=(), env=None):
        self.port = free_port()
        self.hook_port = free_port()
        self.proc = subprocess.Popen(
            [PYTHON, GRPC_RUNTIME, "--port", str(self.port),
             "--hook-port", str(self.hook_port), "--stubs", self.STUBS]
            + list(args),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env=dict(os.environ, **env) if env else None)
        wait_port(self.port, self.proc, timeout=60)
        wait_port(self.hook_port, self.proc, timeout=60)

    def hook(self, method, path, doc=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.hook_port,
                                          timeout=30)
        try:
            conn.request(method, path,
                         body=None if doc is None else json.dumps(doc))
            r = conn.getresponse()
            data = r.read()
            if r.status >= 300:
                raise RuntimeError("%s %s: %d %r" % (method, path, r.status,
                                                      data))
            return json.loads(data) if data else None
        finally:
            conn.close()

    def received(self):
        return self.hook("GET", "/_test/received")

    def stop(self):
        Runtime.stop(self)


def grpc_drop_server():
    """A gRPC upstream that takes each ModelInferRequest as bytes, never
    parsed, and answers a ModelInferResponse of its model's name alone,
    in this process: (port, server; server.stop(None) ends it; the
    length of each message it took in server.calls)."""
    import grpc
    from concurrent import futures

    def infer(request, context):
        server.calls.append(len(request))
        return b"\x0a\x01m"

    handler = grpc.method_handlers_generic_handler(
        "inference.GRPCInferenceService",
        {"ModelInfer": grpc.unary_unary_rpc_method_handler(infer)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2),
                         options=[("grpc.max_receive_message_length", -1)])
    server.add_generic_rpc_handlers((handler,))
    server.calls = []
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return port, server


class Recorder:
    """An upstream that records each request's exact bytes and answers
    what the test says (by default 200 with a small JSON body)."""

    def __init__(self):
        self.requests = []
        self.answer = None
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def handle_one(self):
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length)
                recorder.requests.append({
                    "method": self.command, "path": self.path,
                    "headers": {k.lower(): v for k, v in
                                self.headers.items()},
                    "header_list": list(self.headers.items()),
                    "body": body})
                answer = recorder.answer
                if callable(answer):
                    answer = answer(recorder.requests[-1])
                status, headers, out = answer or (
                    200, {"Content-Type": "application/json"},
                    b'{"model_name":"m","outputs":[]}')
                # chunked, or to the close (Content-Length None): as asked
                chunked = headers.get("Transfer-Encoding") == "chunked"
                self.send_response(status)
                for k, v in headers.items():
                    if v is not None:
                        self.send_header(k, v)
                if "Content-Length" not in headers and not chunked:
                    self.send_header("Content-Length", str(len(out)))
                if headers.get("Content-Length", "") is None:
                    self.close_connection = True
                self.end_headers()
                if self.command == "HEAD":
                    return
                if chunked:
                    half = len(out) // 2
                    for part in (out[:half], out[half:]):
                        if part:
                            self.wfile.write(b"%x\r\n%s\r\n"
                                             % (len(part), part))
                    self.wfile.write(b"0\r\n\r\n")
                else:
                    self.wfile.write(out)

            do_GET = do_POST = do_PUT = do_HEAD = handle_one

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        # polled often: shutdown() waits for the poll (0.5 s by default)
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       args=(0.05,), daemon=True)
        self.thread.start()

    def last(self):
        return self.requests[-1] if self.requests else None

    def clear(self):
        self.requests.clear()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


CONF = """
{main}
worker_processes {workers};
pid {dir}/nginx.pid;
error_log {dir}/error.log {log_level};
load_module {module};

events {{
    worker_connections 1024;
}}

http {{
    access_log off;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;

    {http}

    server {{
        listen 127.0.0.1:{port};
        listen 127.0.0.1:{h2port} http2;

        {server}
    }}
}}
"""


class Nginx:
    """A real nginx with the module loaded, in its own prefix."""

    def __init__(self, server, http="", main="", workers=1,
                 log_level="info", conf=None, port=None, **subst):
        """server, http, main: parts of CONF; or conf, a whole
        configuration in which @PORT@, @DIR@ and @MODULE@ stand for the
        port to listen on, the prefix and the module; port, the port
        when the configuration names it itself (in an included file)."""
        self.dir = tempfile.mkdtemp(prefix="oip-nginx-")
        # workers run unprivileged: let them reach their temp paths
        os.chmod(self.dir, 0o755)
        os.makedirs(os.path.join(self.dir, "logs"))
        self.conf = os.path.join(self.dir, "nginx.conf")
        # a port free_port() found may be taken before nginx binds it
        # (another process's connection; under valgrind nginx takes a
        # second to start): new ports, a few times
        for attempt in range(3):
            self.port = port or free_port()
            self.h2port = free_port()
            self.write_conf(server, http, main, workers, log_level, conf,
                            subst)
            try:
                self.start()
                return
            except RuntimeError:
                if attempt == 2 or not self.port_taken():
                    raise

    def write_conf(self, server, http, main, workers, log_level, conf,
                   subst):
        values = dict(subst, dir=self.dir, port=self.port,
                      h2port=self.h2port)
        if conf is not None:
            conf = (conf.replace("@PORT@", str(self.port))
                    .replace("@DIR@", self.dir).replace("@MODULE@", MODULE))
        else:
            conf = CONF.format(main=main, workers=workers, dir=self.dir,
                               module=MODULE, http=http.format(**values),
                               server=server.format(**values),
                               port=self.port, h2port=self.h2port,
                               log_level=log_level)
        with open(self.conf, "w") as f:
            f.write(conf)

    def port_taken(self):
        try:
            with open(os.path.join(self.dir, "error.log"),
                      errors="replace") as f:
                return "Address already in use" in f.read()
        except OSError:
            return False

    def start(self):
        env = dict(os.environ, **NGINX_ENV)
        wrap = [w.replace("%DIR%", self.dir) for w in NGINX_WRAP]
        g = "daemon off;" + (" master_process off;" if SINGLE else "")
        pid = self.pid_file()
        try:
            os.unlink(pid)      # a killed one's, from an earlier start
        except OSError:
            pass
        self.proc = subprocess.Popen(
            wrap + [NGINX, "-p", self.dir + "/", "-c", self.conf,
                    "-e", self.dir + "/error.log", "-g", g],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_port(self.port, self.proc, timeout=15 * SLOW)
        self.wait_signals(pid)

    def pid_file(self):
        with open(self.conf) as f:
            m = re.search(r"^\s*pid\s+([^;\s]+)\s*;", f.read(), re.M)
        return os.path.join(self.dir, m.group(1) if m else "logs/nginx.pid")

    def wait_signals(self, path):
        """Waits until nginx takes signals: it listens before it sets its
        handlers, and writes its pid file after.  A SIGQUIT in between is
        lost under valgrind (which neither dies of it nor passes it on):
        nginx then ran on until killed, half a minute, in 2 of 3 runs of
        the suite, always a class whose nginx was stopped just after it
        started."""
        deadline = time.time() + 15 * SLOW
        while time.time() < deadline and self.proc.poll() is None:
            try:
                with open(path) as f:
                    if f.read().strip():
                        return
            except OSError:
                pass
            time.sleep(0.02)

    def workers(self):
        if SINGLE:
            return [self.proc.pid] if self.proc.poll() is None else []
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)],
                             capture_output=True, text=True).stdout
        return sorted(int(p) for p in out.split())

    def log(self):
        text = ""
        for name in sorted(os.listdir(self.dir)):
            if name == "error.log" or name.startswith("valgrind"):
                with open(os.path.join(self.dir, name),
                          errors="replace") as f:
                    text += f.read()
        return text

    def wake(self):
        """A connection, to wake an nginx that sleeps through its signal.

        One nginx process alone (master_process off, as under valgrind)
        learns of SIGQUIT when the signal interrupts epoll_wait; one taken
        just outside the call leaves it waiting with no timer pending,
        until an event comes.  Any event makes it look at the flag."""
        try:
            socket.create_connection(("127.0.0.1", self.port), 1).close()
        except OSError:
            pass

    def stop(self):
        """Stops nginx; returns the lines of its log that must not be."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            # valgrind's exit with its leak check takes a second or two; a
            # process still there after half a minute is stuck, and is
            # killed, where() saying where it was.  (The one known cause,
            # a SIGQUIT before nginx set its handlers, is waited out in
            # start().)
            deadline = time.time() + (30 if NGINX_WRAP else 15)
            while True:
                try:
                    self.proc.wait(1)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if time.time() > deadline:
                    sys.stderr.write("nginx (%s) did not stop on SIGQUIT: "
                                     "killed; where it was:\n%s"
                                     % (self.dir, self.where()))
                    self.proc.kill()
                    self.proc.wait()
                    break
                self.wake()
        err = self.proc.stderr.read().decode(errors="replace")
        self.proc.stderr.close()
        bad = [l for l in (self.log() + err).splitlines() if BAD_LOG.search(l)]
        if not bad:
            shutil.rmtree(self.dir, ignore_errors=True)
        return bad

    def where(self):
        """What each of its threads waits in: state, wait channel and
        system call (number and arguments), for a process that will not
        stop."""
        out = []
        base = "/proc/%d/task" % self.proc.pid
        try:
            tasks = sorted(os.listdir(base), key=int)
        except OSError:
            return "  (gone)\n"
        for tid in tasks:
            info = []
            for name in ("stat", "wchan", "syscall"):
                try:
                    with open(os.path.join(base, tid, name)) as f:
                        text = f.read().strip()
                except OSError:
                    text = "?"
                if name == "stat":
                    text = text.rsplit(")", 1)[-1].split()[0]
                info.append("%s=%s" % (name, text))
            try:
                with open(os.path.join(base, tid, "status")) as f:
                    info += [l.replace(":\t", "=")
                             for l in f.read().split("\n")
                             if l[:3] in ("Sig", "Shd")]
            except OSError:
                pass
            out.append("  task %s: %s\n" % (tid, " ".join(info)))
        # what the event loop watches
        fds = "/proc/%d/fd" % self.proc.pid
        try:
            for fd in sorted(os.listdir(fds), key=int):
                link = os.readlink(os.path.join(fds, fd))
                if "eventpoll" in link:
                    with open("/proc/%d/fdinfo/%s" % (self.proc.pid, fd)) as f:
                        out.append("  epoll fd %s:\n%s" % (fd, f.read()))
                else:
                    out.append("  fd %s: %s\n" % (fd, link))
        except OSError:
            pass
        lines = self.log().splitlines()
        out.append("  its log, %d lines; of signals and its last:\n%s"
                   % (len(lines), "".join(
                       "    " + l + "\n" for l in
                       [l for l in lines if "signal" in l] + lines[-2:])))
        return "".join(out)

    def request(self, method, path, body=None, headers=None, h2=False,
                timeout=30):
        """(status, headers with lower-case names, body)."""
        if GOLDEN and method == "POST":
            headers = golden_request(path, headers, body)
        conn = http.client.HTTPConnection("127.0.0.1", self.port,
                                          timeout=timeout * SLOW)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            data = r.read()
            out = r.status, {k.lower(): v for k, v in r.getheaders()}, data
        finally:
            conn.close()
        if GOLDEN and method == "POST":
            golden_answer(headers, out)
        return out

    def post(self, path, body, headers=None, **kw):
        return self.request("POST", path, body, headers, **kw)

    def curl(self, *args, h2=False, data=None):
        """curl, for HTTP/2 and chunked uploads; returns (status, body)."""
        port = self.h2port if h2 else self.port
        cmd = ["curl", "-s", "-o", "-", "-w", "\n%{http_code}",
               "--max-time", str(30 * SLOW)]
        if h2:
            cmd.append("--http2-prior-knowledge")
        cmd += list(args)
        cmd = [c.replace("{base}", "http://127.0.0.1:%d" % port)
               for c in cmd]
        out = subprocess.run(cmd, input=data, capture_output=True).stdout
        body, _, status = out.rpartition(b"\n")
        return int(status or 0), body


class GatewayTestCase(unittest.TestCase):
    """Starts what cls.setUpGateway() asks for; checks logs at the end."""

    nginx = None
    runtimes = ()
    recorder = None

    @classmethod
    def setUpClass(cls):
        cls._stoppers = []
        try:
            cls.setUpGateway()
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def start_runtime(cls, family="triton", args=(), **kw):
        rt = Runtime(family, args, **kw)
        cls._stoppers.append(rt.stop)
        return rt

    @classmethod
    def start_grpc_runtime(cls, args=(), env=None):
        rt = GrpcRuntime(args, env)
        cls._stoppers.append(rt.stop)
        return rt

    @classmethod
    def start_recorder(cls):
        rec = Recorder()
        cls._stoppers.append(rec.stop)
        return rec

    @classmethod
    def start_nginx(cls, server, **kw):
        ngx = Nginx(server, **kw)
        cls._nginxes = getattr(cls, "_nginxes", []) + [ngx]
        return ngx

    @classmethod
    def tearDownClass(cls):
        bad = []
        for ngx in getattr(cls, "_nginxes", []):
            bad += ngx.stop()
        cls._nginxes = []
        for stop in reversed(cls._stoppers):
            stop()
        if bad:
            raise AssertionError("error log of %s:\n%s"
                                 % (cls.__name__, "\n".join(bad[:20])))

    # helpers

    def assertJSONError(self, resp, status, contains=None):
        st, headers, body = resp
        self.assertEqual(st, status, body)
        self.assertEqual(headers.get("content-type"), "application/json")
        doc = json.loads(body)
        self.assertEqual(list(doc), ["error"], body)
        if contains:
            self.assertIn(contains, doc["error"])
        return doc["error"]


def binary_body(header, chunks=()):
    """(body, IHCL) for a JSON header and binary chunks."""
    h = header if isinstance(header, bytes) else json.dumps(
        header, separators=(",", ":")).encode()
    return h + b"".join(chunks), len(h)


def split_binary(headers, body):
    """(JSON header dict, binary rest) of a response or request body."""
    n = headers.get(IHCL.lower())
    n = int(n) if n is not None else len(body)
    return json.loads(body[:n]), body[n:]


def run_tests():
    """unittest.main with verbose output, for the files themselves."""
    unittest.main(verbosity=2)
