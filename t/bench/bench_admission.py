#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""Admission control under overload (issue 27): goodput and latency
against offered load, with and without oip_admit, in one run.

The upstream is the example runtime (t/runtime/oip_runtime.py) given a
fixed service time: model "identity" runs on N instances, each request
holding one S seconds (PUT /_test/service/identity; the others wait
inside the runtime, as in Triton's queue); its capacity is N/S requests
a second (S = 0.08 s, N = 8 by default: 100/s, 4x is 400/s).  S is
that long because the runtime, in Python, spends about 2 ms of its own
on each request outside the instance (reading, parsing, writing the
answer), which an admission that keeps exactly N requests at the
runtime cannot hide: with S = 0.04 s and N = 4, N closed-loop clients
straight to it get 0.96 of N/S, and a gateway that admitted the next
request at the very instant of a release no more, so the goodput target
(0.95) would measure the runtime; with S = 0.08 s and N = 8 they get
0.98.  The runtime counts the requests it has in flight, waiting ones
included, from the first byte received to just before the last byte
sent, and keeps high-water marks of them and of their tensor bytes (GET
/_test/highwater), reset before each run; it is started anew when a run
leaves requests in it.

Contenders, the gateways each a real nginx with 2 workers (reuseport)
in front of the runtime:

    direct    exactly N closed-loop clients sent straight to the
              runtime: the runtime's own latency at its capacity, the
              baseline of the p99 target
    gateway   oip on, no admission: every request forwarded at once,
              the runtime queues the excess itself
    admit     oip on, with oip_admission_zone zone=adm:1m and
              oip_admit zone=adm concurrency=N queue=256 wait=5s: at
              most N forwarded, up to 256 waiting in the gateway, the
              rest shed with 429

Load: an open-loop client (asyncio, in this process): requests of 1 KB
of FP32 JSON sent at a fixed rate whatever the answers, each on a
kept-alive connection of a pool (opened when none is idle), at 0.5x,
1x, 2x and 4x capacity for OIP_ADMIT_SECONDS (10) each; a request not
answered CLIENT_TIMEOUT (7 s) after its time is given up (its
connection closed).  Latency is counted from the time the request was
due, so a client that falls behind does not hide it.  Each request
carries X-Bench-Id; the gateway's access log gives, by that id,
$upstream_response_time and, under admit, $oip_admission,
$oip_queue_time and $oip_handover_time.

Measured, per contender and offered load: goodput (200 answers
completed within the load's seconds, per second), shed (429s per
second), other answers (timeouts, errors), the 50th and 99th percentile
latency of the 200s, the 99th percentile of $upstream_response_time of
the requests forwarded, and the runtime's high-water marks (requests
in flight, those holding an instance, tensor bytes).  Under admit, the
hand-over delay ($oip_handover_time, from a release to the waiter it
grants running on, in either worker) of queued requests, over every
admit run.

Targets (issue 27), at 4x capacity under admit:
    the runtime's concurrent high-water <= N;
    goodput >= 0.95 x capacity (N/S);
    p99 of $upstream_response_time <= 1.2 x direct's p99 latency;
    hand-over delay: median <= 1 ms, p99 <= 5 ms.
The exit status says whether they all held; a target that was not
measured (a module without oip_admit: the admit contender is skipped,
with a message) counts as missed.

Environment: OIP_ADMIT_SECONDS (10), OIP_ADMIT_SERVICE (S, 0.08),
OIP_ADMIT_INSTANCES (N, 8), OIP_ADMIT_LOADS ("0.5,1,2,4"),
OIP_ADMIT_DATA (a file for t/bench/plot.py: a line per contender and
load), OIP_MODULE (the module; copied before use, so that a rebuild
does not change it under a running nginx).
"""

import asyncio
import http.client
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))

from bench_e2e import NGINX, Server, fp32_json
from oiptest import MODULE, PYTHON, RUNTIME, free_port, wait_port

SECONDS = float(os.environ.get("OIP_ADMIT_SECONDS", "10"))
SERVICE = float(os.environ.get("OIP_ADMIT_SERVICE", "0.08"))
INSTANCES = int(os.environ.get("OIP_ADMIT_INSTANCES", "8"))
LOADS = [float(x) for x in
         os.environ.get("OIP_ADMIT_LOADS", "0.5,1,2,4").split(",")]
CAPACITY = INSTANCES / SERVICE
QUEUE = 256
WAIT = 5                    # seconds: oip_admit's wait
CLIENT_TIMEOUT = WAIT + 2   # seconds after the request was due
MODEL = "identity"
URI = "/v2/models/%s/infer" % MODEL

ADMIT_DIRECTIVES = (b"oip_admission_zone", b"oip_admit")
# the module's variables of admission, logged when the module has them
ADMIT_VARS = ("oip_admission", "oip_queue_time", "oip_handover_time")

CONF = """
worker_processes 2;
worker_rlimit_nofile 20000;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
load_module {module};

events {{
    worker_connections 8192;
}}

http {{
    access_log off;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    keepalive_requests 1000000;

    log_format bench '$http_x_bench_id|$status|$upstream_response_time|'
                     '$request_time{fields}';

    {http}

    upstream runtime {{
        server 127.0.0.1:{up};
        keepalive 64;
    }}

    server {{
        listen 127.0.0.1:{port} reuseport;

        location /v2/ {{
            oip on;
            {location}
            access_log {dir}/access.log bench;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass http://runtime;
        }}
    }}
}}
"""

ADMIT_HTTP = "oip_admission_zone zone=adm:1m;"
ADMIT_LOCATION = ("oip_admit zone=adm concurrency=%d queue=%d wait=%ds;"
                  % (INSTANCES, QUEUE, WAIT))


class BenchRuntime:
    """The example runtime, on one port for the whole run (the gateways
    name it), started anew when a run leaves requests in it; the model
    on `instances` of `seconds` each (this bench's, by default)."""

    def __init__(self, work, seconds=SERVICE, instances=INSTANCES):
        self.seconds, self.instances = seconds, instances
        self.port = free_port()
        self.log = os.path.join(work, "runtime.log")
        self.proc = None
        self.start()

    def start(self):
        # its stderr to a file: thousands of abandoned requests may each
        # print a traceback, which a pipe nobody reads would block on
        with open(self.log, "ab") as err:
            self.proc = subprocess.Popen(
                [PYTHON, RUNTIME, "--port", str(self.port)],
                stdout=subprocess.DEVNULL, stderr=err)
        wait_port(self.port, self.proc)
        self.hook("PUT", "/_test/service/" + MODEL,
                  {"seconds": self.seconds, "instances": self.instances})

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc:
            self.proc.wait()

    def restart(self):
        self.stop()
        self.start()

    def hook(self, method, path, doc=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path,
                         body=None if doc is None else json.dumps(doc))
            r = conn.getresponse()
            data = r.read()
            if r.status != 200:
                raise RuntimeError("%s %s: %d %r" % (method, path, r.status,
                                                      data))
            return json.loads(data)
        finally:
            conn.close()

    def marks(self):
        return self.hook("GET", "/_test/highwater").get(
            MODEL, {"concurrent": 0, "running": 0, "bytes": 0, "now": 0,
                    "served": 0})

    def settle(self):
        """Nothing left in flight (a moment for the last answers), else a
        fresh runtime; then the marks reset."""
        deadline = time.time() + 1
        while self.marks()["now"] and time.time() < deadline:
            time.sleep(0.05)
        if self.marks()["now"]:
            self.restart()
        self.hook("POST", "/_test/highwater/reset")


# ---------------------------------------------------------------- client


class Pool:
    """Kept-alive connections to one port: an idle one if there is one,
    else a new one."""

    def __init__(self, port):
        self.port, self.idle = port, []

    async def get(self):
        while self.idle:
            reader, writer = self.idle.pop()
            if not writer.is_closing() and not reader.at_eof():
                return reader, writer
            writer.close()
        return await asyncio.open_connection("127.0.0.1", self.port)

    def close(self):
        for _, writer in self.idle:
            writer.close()
        self.idle = []


async def read_answer(reader):
    """(status, body, kept alive?) of one HTTP/1.1 answer."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    keep = headers.get("connection", "").lower() != "close"
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            body += await reader.readexactly(size + 2)
            if size == 0:
                break
    else:
        body, keep = await reader.read(), False
    return status, body, keep


async def exchange(pool, request):
    """One request on a connection of the pool: (status, body)."""
    reader, writer = await pool.get()
    try:
        writer.write(request)
        status, body, keep = await read_answer(reader)
    except BaseException:
        # a timeout (cancelled) or an error: the connection is not reused
        writer.close()
        raise
    if keep:
        pool.idle.append((reader, writer))
    else:
        writer.close()
    return status, body


def request_bytes(body, rid):
    return (b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n"
            b"X-Bench-Id: %s\r\n\r\n" % (URI.encode(), len(body),
                                         rid.encode())) + body


async def one(pool, request, due, t0, rec):
    """A request due at `due` (loop time); rec gets status (0: given up
    at CLIENT_TIMEOUT, -1: a connection error), end, latency (seconds
    from due)."""
    loop = asyncio.get_running_loop()
    rec["late"] = loop.time() - due
    try:
        rec["status"], _ = await asyncio.wait_for(
            exchange(pool, request), due + CLIENT_TIMEOUT - loop.time())
    except asyncio.TimeoutError:
        rec["status"] = 0
    except (OSError, asyncio.IncompleteReadError, ValueError,
            asyncio.LimitOverrunError):
        rec["status"] = -1
    now = loop.time()
    rec["end"], rec["latency"] = now - t0, now - due


async def open_loop(port, body, rate, seconds, tag):
    """Requests at a fixed rate for seconds, whatever the answers; one
    record a request."""
    return await scheduled(port, body, [i / rate
                                        for i in range(int(rate * seconds))],
                           tag)


async def scheduled(port, body, times, tag):
    """Requests due at the given times (seconds from the start),
    whatever the answers; one record a request."""
    loop = asyncio.get_running_loop()
    pool = Pool(port)
    records, tasks = [], []
    t0 = loop.time() + 0.05
    for i, t in enumerate(times):
        due = t0 + t
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        rec = {"id": "%s-%d" % (tag, i)}
        records.append(rec)
        tasks.append(asyncio.ensure_future(
            one(pool, request_bytes(body, rec["id"]), due, t0, rec)))
    await asyncio.gather(*tasks)
    pool.close()
    return records


async def closed_loop(port, body, clients, seconds, tag):
    """clients, each sending its next request when it has its answer."""
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    records = []

    async def client(c):
        pool = Pool(port)
        i = 0
        while loop.time() < t0 + seconds:
            rec = {"id": "%s-%d-%d" % (tag, c, i)}
            await one(pool, request_bytes(body, rec["id"]), loop.time(),
                      t0, rec)
            records.append(rec)
            i += 1
        pool.close()

    await asyncio.gather(*(client(c) for c in range(clients)))
    return records


# ---------------------------------------------------------------- gateway


def module_copy(work):
    """The module, copied: a rebuild renames a new one into build/."""
    path = os.path.join(work, "ngx_http_oip_module.so")
    shutil.copy(MODULE, path)
    return path


def admission_support(module):
    """(directives there?, the admission variables the module has)"""
    with open(module, "rb") as f:
        blob = f.read()
    has = all(d + b"\0" in blob for d in ADMIT_DIRECTIVES)
    return has, [v for v in ADMIT_VARS if v.encode() + b"\0" in blob]


def log_fields(variables):
    """The admission variables in the log format, "-" for those the
    module does not have."""
    return "".join("|$" + v if v in variables else "|-" for v in ADMIT_VARS)


def conf_error(conf, **subst):
    """nginx -t's complaint about a configuration, or None."""
    work = tempfile.mkdtemp(prefix="oip-bench-admit-t-")
    try:
        path = os.path.join(work, "nginx.conf")
        with open(path, "w") as f:
            f.write(conf.format(dir=work, port=free_port(), **subst))
        out = subprocess.run([NGINX, "-t", "-p", work, "-c", path,
                              "-e", os.path.join(work, "error.log")],
                             capture_output=True, text=True)
        return None if out.returncode == 0 else out.stderr.strip()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def access_log(server, offset):
    """{id: (urt seconds or None, admission, queue, handover or None)}
    of the lines past offset."""
    out = {}
    with open(os.path.join(server.dir, "access.log")) as f:
        f.seek(offset)
        for line in f:
            parts = line.rstrip("\n").split("|")
            if len(parts) < 4:
                continue
            rid, _, urt = parts[0], parts[1], parts[2]
            extra = parts[4:7] + ["-"] * (7 - len(parts))
            out[rid] = (seconds(urt), extra[0], seconds(extra[1]),
                        seconds(extra[2]))
    return out


def seconds(text):
    """A logged time ("0.041", "0.040, 0.002" after a retry, "-", "")
    in seconds, or None."""
    vals = [v.strip() for v in text.replace(" : ", ",").split(",")]
    vals = [float(v) for v in vals if v and v != "-"]
    return sum(vals) if vals else None


def log_size(server):
    try:
        return os.path.getsize(os.path.join(server.dir, "access.log"))
    except OSError:
        return 0


def pct(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


def summary(records, window, logged=None):
    ok = [r for r in records if r["status"] == 200]
    good = sum(1 for r in ok if r["end"] <= window)
    shed = sum(1 for r in records if r["status"] == 429)
    lat = [r["latency"] * 1e3 for r in ok]
    out = {"n": len(records), "goodput": good / window,
           "shed": shed / window,
           "other": (len(records) - len(ok) - shed) / window,
           "p50": pct(lat, 50), "p99": pct(lat, 99),
           "late_p99": pct([r["late"] * 1e3 for r in records], 99),
           "statuses": {}}
    for r in records:
        out["statuses"][r["status"]] = out["statuses"].get(r["status"],
                                                           0) + 1
    if logged is not None:
        urt = [logged[r["id"]][0] * 1e3 for r in ok
               if r["id"] in logged and logged[r["id"]][0] is not None]
        out["urt_p99"] = pct(urt, 99)
        out["logged"] = sum(1 for r in records if r["id"] in logged)
        out["admission"] = {}
        for r in records:
            a = logged.get(r["id"], (None, "-"))[1]
            out["admission"][a] = out["admission"].get(a, 0) + 1
        queue = [logged[r["id"]][2] * 1e3 for r in records
                 if r["id"] in logged and logged[r["id"]][1] == "queued"
                 and logged[r["id"]][2] is not None]
        out["queue"] = (statistics.median(queue), pct(queue, 99)) \
            if queue else None
    return out


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    work = tempfile.mkdtemp(prefix="oip-admit-")
    os.chmod(work, 0o755)
    module = module_copy(work)
    has_admit, variables = admission_support(module)
    body = fp32_json(1024, 1)
    loop = asyncio.new_event_loop()

    contenders = [("gateway", "oip on", "", "", "")]
    skipped = None
    if not has_admit:
        skipped = ("the module (%s) has no oip_admit: the admit contender "
                   "is skipped" % MODULE)
    else:
        fields = log_fields(variables)
        err = conf_error(CONF, module=module, up=free_port(),
                         fields=fields, http=ADMIT_HTTP,
                         location=ADMIT_LOCATION)
        if err:
            skipped = ("nginx refuses the admit configuration: the admit "
                       "contender is skipped:\n" + err)
        else:
            contenders.append(("admit", "oip on, oip_admit", ADMIT_HTTP,
                               ADMIT_LOCATION, fields))
            missing = [v for v in ADMIT_VARS if v not in variables]
            if missing:
                print("(the module has no %s: logged as \"-\")"
                      % ", ".join("$" + v for v in missing))
    if skipped:
        print(skipped)

    runtime = BenchRuntime(work)
    servers = {}
    results = {}
    handover = []
    try:
        for key, _, http_conf, location, fields in contenders:
            servers[key] = Server(key, CONF, module=module, up=runtime.port,
                                  http=http_conf, location=location,
                                  fields=fields)
        # warm up: every gateway (N clients: within any budget), and a
        # right answer
        for key in servers:
            recs = loop.run_until_complete(closed_loop(
                servers[key].port, body, INSTANCES, 0.5, "warm"))
            bad = [r for r in recs if r["status"] != 200]
            if bad:
                raise RuntimeError("%s: warm-up answered %s"
                                   % (key, sorted({r["status"]
                                                   for r in bad})))
        conn = http.client.HTTPConnection("127.0.0.1", runtime.port)
        conn.request("POST", URI, body)
        answer = conn.getresponse().read()
        conn.close()
        if b'"OUTPUT0"' not in answer:
            raise RuntimeError("the runtime answered %r" % answer[:200])

        runtime.settle()
        recs = loop.run_until_complete(closed_loop(
            runtime.port, body, INSTANCES, SECONDS, "direct"))
        results[("direct", 0)] = dict(summary(recs, SECONDS),
                                      marks=runtime.marks(), urt_p99=None)

        run = 0
        for factor in LOADS:
            for key, _, _, _, _ in contenders:
                run += 1
                runtime.settle()
                offset = log_size(servers[key])
                recs = loop.run_until_complete(open_loop(
                    servers[key].port, body, factor * CAPACITY, SECONDS,
                    "r%d" % run))
                marks = runtime.marks()
                time.sleep(0.3)             # the last lines of the log
                logged = access_log(servers[key], offset)
                results[(key, factor)] = dict(
                    summary(recs, SECONDS, logged), marks=marks)
                if key == "admit":
                    handover += [logged[r["id"]][3] * 1e3 for r in recs
                                 if r["id"] in logged
                                 and logged[r["id"]][1] == "queued"
                                 and logged[r["id"]][3] is not None]
    finally:
        loop.close()
        for s in servers.values():
            try:
                s.stop()
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                print("nginx %s: %s" % (s.name, e))
        runtime.stop()
        shutil.rmtree(work, ignore_errors=True)

    print("admission, 2 workers, the example runtime: %s on %d instances "
          "of %.0f ms (capacity %.0f/s); open loop, %g s a load, 1 KB FP32 "
          "JSON" % (MODEL, INSTANCES, SERVICE * 1e3, CAPACITY, SECONDS))
    print("%-8s %5s %7s | %8s %7s %7s | %8s %8s %8s | %5s %5s %7s | %7s"
          % ("", "load", "req/s", "goodput", "shed/s", "other/s", "p50 ms",
             "p99 ms", "urt p99", "conc", "run", "bytes", "late ms"))
    rows = []
    for (key, factor), r in results.items():
        m = r["marks"]
        offered = factor * CAPACITY if factor else CAPACITY
        print("%-8s %5s %7.0f | %8.1f %7.1f %7.1f | %8.1f %8.1f %8s | "
              "%5d %5d %7d | %7.1f"
              % (key, "%gx" % factor if factor else "N cl",
                 offered if factor else r["n"] / SECONDS,
                 r["goodput"], r["shed"], r["other"], r["p50"], r["p99"],
                 "-" if r["urt_p99"] is None else "%.1f" % r["urt_p99"],
                 m["concurrent"], m["running"], m["bytes"], r["late_p99"]))
        rows.append("%s %g %.1f %.2f %.2f %.2f %.2f %s %d\n"
                    % (key, factor or 1, offered, r["goodput"], r["shed"],
                       r["p50"], r["p99"],
                       "-" if r["urt_p99"] is None else "%.2f" % r["urt_p99"],
                       m["concurrent"]))
    for (key, factor), r in results.items():
        if key == "direct":
            continue
        more = ""
        if key == "admit":
            more = "; $oip_admission %s" % json.dumps(r["admission"],
                                                      sort_keys=True)
            if r["queue"]:
                more += "; $oip_queue_time of queued: median %.0f ms, " \
                    "p99 %.0f ms" % r["queue"]
        print("  %-8s %4gx: answers %s%s"
              % (key, factor, json.dumps(r["statuses"], sort_keys=True),
                 more))
    if handover:
        print("hand-over ($oip_handover_time of %d queued requests, every "
              "admit run): median %.3f ms, p99 %.3f ms, max %.3f ms"
              % (len(handover), statistics.median(handover),
                 pct(handover, 99), max(handover)))

    data = os.environ.get("OIP_ADMIT_DATA")
    if data:
        os.makedirs(os.path.dirname(os.path.abspath(data)), exist_ok=True)
        with open(data, "w") as f:
            f.write("# contender load offered goodput shed p50_ms p99_ms "
                    "urt_p99_ms runtime_concurrent (direct: N closed-loop "
                    "clients, offered = capacity)\n")
            f.writelines(rows)

    fails = 0

    def target(what, value, bound, at_least):
        nonlocal fails
        good = value >= bound if at_least else value <= bound
        fails += not good
        print("  %-56s %7.2f  (%s %.2f)  %s"
              % (what, value, ">=" if at_least else "<=", bound,
                 "ok" if good else "MISSED"))

    def missing(what, bound):
        nonlocal fails
        fails += 1
        print("  %-56s %7s  (%s)  NOT MEASURED: no admit contender"
              % (what, "-", bound))

    top = max(LOADS)
    print("\ntargets (admission, at %gx capacity):" % top)
    admit = results.get(("admit", top))
    direct = results[("direct", 0)]
    if admit:
        target("runtime's concurrent high-water under admit",
               admit["marks"]["concurrent"], INSTANCES, False)
        target("goodput under admit / capacity (N/S)",
               admit["goodput"] / CAPACITY, 0.95, True)
        target("p99 $upstream_response_time, admit / direct's p99",
               admit["urt_p99"] / direct["p99"], 1.2, False)
    else:
        missing("runtime's concurrent high-water under admit",
                "<= %d" % INSTANCES)
        missing("goodput under admit / capacity (N/S)", ">= 0.95")
        missing("p99 $upstream_response_time, admit / direct's p99",
                "<= 1.20")
    if handover:
        target("hand-over delay, median (ms)", statistics.median(handover),
               1, False)
        target("hand-over delay, p99 (ms)", pct(handover, 99), 5, False)
    elif admit and "oip_handover_time" in variables:
        fails += 1
        print("  hand-over delay: no queued request logged one  MISSED")
    else:
        missing("hand-over delay, median (ms)", "<= 1")
        missing("hand-over delay, p99 (ms)", "<= 5")
    print("  %-56s %7.2f  (no target)"
          % ("direct: N closed-loop clients' req/s / capacity",
             direct["n"] / SECONDS / CAPACITY))
    if ("gateway", top) in results:
        print("  %-56s %7.2f  (no target)"
              % ("goodput without admission / capacity",
                 results[("gateway", top)]["goodput"] / CAPACITY))
    print("all targets met" if not fails else "SOME TARGETS MISSED")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
