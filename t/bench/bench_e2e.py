#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""End to end through real nginx on the loopback: what the module costs
a request, side by side in one run with what it is compared to.

Contenders, each its own nginx with one worker, all in front of the same
upstream (an nginx that reads the body and answers a small inference
response at once, so that the gateway is what is measured):

    plain     proxy_pass alone
    keep      oip on: every request checked, passed on as it came
    listed    the same, the client listing its output: the answer is
              held and read, to drop outputs it did not list (what
              reading answers under keep costs)
    generated the same values as a generate request, oip_generate
              emulate (by the signature) to /infer, the answer made a
              generate answer
    signed    keep, with oip_signatures: each request checked against
              its model's signature, from the zone (fetched once)
    binary    oip on; oip_upstream_inputs binary: JSON tensors converted
    logged    keep, with an access log of nginx's own variables
    operated  logged, with the metrics zone and the module's variables
              in the log, all but $oip_digest (docs/operations.md)
    padded    logged, with ten more of nginx's own variables where
              operated has the module's: what ten more fields cost any
              access log, whoever computes them (no target)
    digested  binary, with $oip_digest in an access log: the tensor
              digest computed on every request
    grpc      binary's conversion, then the request as a gRPC ModelInfer
              call (oip_upstream_protocol grpc, grpc_pass) to the same
              upstream nginx on an HTTP/2 port, where a static
              ModelInferResponse answers with grpc-status 0 in a trailer
    peer      the OpenResty script operators deploy today
              (../shared/peers/openresty/json_to_binary.lua, beside
              this repository or the one it was cloned from; OIP_PEER_LUA
              names another copy; without one the row is left out and
              its target counts as missed)

Measured:
    1 KB FP32 JSON requests with wrk (16 connections): requests/s and
    the 50th and 99th percentile latency of the median of ROUNDS (9)
    rounds; in a round the contenders take turns there and back, each
    twice for TURN (2) seconds, its figures the mean of the two
    (a steady drift of the machine's speed then weighs the same on
    all); the ratio to proxy_pass is the median of the rounds' ratios (a
    round's runs are close in time, the shared machine's moods are not);
    and the gateway worker's CPU time per request over all runs;
    a 12.7 MB FP32 JSON request, BIG_RUNS (15) times each, contenders
    taking turns: the median latency, what it adds to plain proxy_pass,
    and the worker's peak RSS (VmHWM, reset before the runs); REST ->
    gRPC against REST -> REST binary, neighbours in every turn, is the
    median of the runs' ratios, as the 1 KB ratios are.

The targets of the speed work are checked at the end; the exit status
says whether they all held.
"""

import http.client
import os
import random
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from oiptest import MODULE, ROOT, free_port, wait_port

NGINX = "/usr/sbin/nginx"
WRK = shutil.which("wrk") or "/usr/bin/wrk"
LUA_MODULES = "/usr/lib/nginx/modules"
PEER_PATH = os.path.join("shared", "peers", "openresty", "json_to_binary.lua")


def find_peer():
    """OIP_PEER_LUA, else shared/ beside this repository or, for a clone
    made elsewhere (a scratch directory), beside the one it was cloned
    from: the peer is not ours to commit."""
    if os.environ.get("OIP_PEER_LUA"):
        return os.environ["OIP_PEER_LUA"]
    places = [ROOT]
    try:
        origin = subprocess.run(
            ["git", "-C", ROOT, "config", "remote.origin.url"],
            capture_output=True, text=True).stdout.strip()
        if origin and os.path.isdir(origin):
            places.append(origin)
    except OSError:
        pass
    for place in places:
        path = os.path.join(place, "..", PEER_PATH)
        if os.path.exists(path):
            return os.path.normpath(path)
    return os.path.normpath(os.path.join(ROOT, "..", PEER_PATH))


PEER = find_peer()

SECONDS = int(os.environ.get("OIP_BENCH_SECONDS", "3"))   # bench_mixed's runs
TURN = 2                    # seconds: a contender's turn, twice a round
ROUNDS = 9
BIG_RUNS = 15
BIG_SIZE = 12_700_000
URI = "/v2/models/m/infer"

ANSWER = ('{"model_name":"m","model_version":"1","outputs":[{"name":'
          '"OUTPUT0","shape":[1,1],"datatype":"FP32","data":[0.5]}]}')

CONF = """
{main}
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;

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

    # bodies in memory, as an inference gateway is set up
    client_max_body_size 256m;
    client_body_buffer_size 64m;

    {http}

    upstream backend {{
        server 127.0.0.1:{up};
        keepalive 32;
    }}

    server {{
        listen 127.0.0.1:{port} reuseport;

        location / {{
            {location}
            {upstream_pass}
        }}
        {server}
    }}
}}
"""

PROXY_PASS = """proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass http://backend;"""

GRPC_HTTP = """
    upstream grpc_backend {
        server 127.0.0.1:@GRPC@;
        keepalive 32;
    }
"""

# the signature of the model the 1 KB requests are for
METADATA = ('{"name":"m","versions":["1"],"platform":"python","inputs":'
            '[{"name":"INPUT0","datatype":"FP32","shape":[1,-1]}],'
            '"outputs":[{"name":"OUTPUT0","datatype":"FP32",'
            '"shape":[1,1]}]}')

SIGNED_HTTP = "oip_signature_zone zone=models:1m valid=3600s;"
SIGNED_SERVER = """
        location /_oip_meta/ {
            internal;
            proxy_pass http://backend/;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass_request_body off;
            proxy_pass_request_headers off;
            proxy_set_header Content-Length "";
            subrequest_output_buffer_size 64k;
        }"""

UPSTREAM_CONF = """
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;

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
    client_max_body_size 256m;
    client_body_buffer_size 64m;
    keepalive_requests 1000000;

    server {{
        listen 127.0.0.1:{port};

        location / {{
            default_type application/json;
            return 200 '{answer}';
        }}

        location = /v2/models/m {{
            default_type application/json;
            return 200 '{metadata}';
        }}
    }}

    # gRPC: the answer a file (nginx's strings hold no NUL), fetched
    # once the whole body is read, as a gRPC server reads the message
    # before it answers; its status a trailer
    server {{
        listen 127.0.0.1:{grpc_port} http2;
        http2_max_concurrent_streams 1024;

        location = /inference.GRPCInferenceService/ModelInfer {{
            proxy_pass http://127.0.0.1:{port2}/answer.grpc;
            proxy_method GET;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            add_trailer grpc-status 0;
        }}
    }}

    server {{
        listen 127.0.0.1:{port2};

        location = /answer.grpc {{
            root {grpc_dir};
            default_type application/grpc;
        }}
    }}
}}
"""


def grpc_answer():
    """ANSWER as a framed ModelInferResponse (grpc_predict_v2.proto):
    model m, version 1, OUTPUT0 FP32 [1, 1], 0.5 in raw_output_contents."""
    def field(number, data):
        return bytes([number << 3 | 2, len(data)]) + data
    out = (field(1, b"OUTPUT0") + field(2, b"FP32")
           + field(3, b"\x01\x01"))
    msg = (field(1, b"m") + field(2, b"1") + field(5, out)
           + field(6, struct.pack("<f", 0.5)))
    return b"\x00" + struct.pack(">I", len(msg)) + msg


class Server:
    """One nginx, its own prefix, one worker."""

    def __init__(self, name, conf, **subst):
        self.name = name
        self.subst = subst
        self.dir = tempfile.mkdtemp(prefix="oip-bench-%s-" % name)
        self.port = free_port()
        with open(os.path.join(self.dir, "nginx.conf"), "w") as f:
            f.write(conf.format(dir=self.dir, port=self.port, **subst)
                    .replace("@DIR@", self.dir))
        self.proc = subprocess.Popen(
            [NGINX, "-p", self.dir, "-c", os.path.join(self.dir, "nginx.conf"),
             "-e", os.path.join(self.dir, "error.log"),
             "-g", "daemon off;"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_port(self.port, self.proc)

    def worker(self):
        out = subprocess.run(["ps", "-o", "pid=", "--ppid",
                              str(self.proc.pid)],
                             capture_output=True, text=True).stdout.split()
        return int(out[0])

    def status(self, field):
        with open("/proc/%d/status" % self.worker()) as f:
            return int(re.search(field + r":\s+(\d+) kB", f.read()).group(1))

    def cpu(self):
        """The worker's user and system time so far, in seconds."""
        with open("/proc/%d/stat" % self.worker()) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def cpu_ns(self):
        """The worker's time on a CPU so far, in nanoseconds."""
        with open("/proc/%d/schedstat" % self.worker()) as f:
            return int(f.read().split()[0])

    def reset_peak(self):
        with open("/proc/%d/clear_refs" % self.worker(), "w") as f:
            f.write("5")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        with open(os.path.join(self.dir, "error.log")) as f:
            log = f.read()
        shutil.rmtree(self.dir, ignore_errors=True)
        if re.search(r"\[(alert|emerg|crit)\]|exited on signal", log):
            raise RuntimeError("%s: %s" % (self.name, log))


def fp32_json(size, seed, outputs=""):
    """A JSON FP32 request of about size bytes, values as models have;
    outputs: an "outputs" member to add."""
    rnd = random.Random(seed)
    parts, total = [], 80
    while total < size:
        v = struct.unpack("f", struct.pack("f", rnd.uniform(-2, 2)))[0]
        s = "%.8g" % v
        parts.append(s)
        total += len(s) + 1
    return ('{"inputs":[{"name":"INPUT0","shape":[1,%d],"datatype":"FP32",'
            '"data":[%s]}]%s}' % (len(parts), ",".join(parts),
                                  outputs)).encode()


def as_generate(infer_json):
    """An fp32_json() request as the generate request of the same values"""
    start = infer_json.index(b'"data":') + len(b'"data":')
    return b'{"INPUT0":' + infer_json[start:infer_json.rindex(b"}]")] + b"}"


def wrk_script(body_file, extra=""):
    """A wrk script POSTing the file's bytes; extra: more Lua."""
    script = body_file + (".steady.lua" if extra else ".lua")
    with open(script, "w") as f:
        f.write('local f = io.open("%s", "rb")\n'
                'wrk.method = "POST"\n'
                'wrk.body = f:read("*a")\n'
                'f:close()\n'
                'wrk.headers["Content-Type"] = "application/json"\n%s'
                % (body_file, extra))
    return script


def wrk(port, body_file, seconds):
    script = wrk_script(body_file)
    out = subprocess.run(
        [WRK, "-t1", "-c16", "-d%ds" % seconds, "--latency", "-s", script,
         "http://127.0.0.1:%d%s" % (port, URI)],
        capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("wrk: " + out.stdout + out.stderr)
    out = out.stdout

    def ms(text):
        v, unit = re.match(r"([\d.]+)(us|ms|s|m)$", text).groups()
        return float(v) * {"us": 1e-3, "ms": 1, "s": 1e3, "m": 6e4}[unit]

    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    count = int(re.search(r"(\d+) requests in", out).group(1))
    p50 = ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))
    p99 = ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))
    if re.search(r"Non-2xx|Socket errors", out):
        raise RuntimeError("wrk saw errors:\n" + out)
    return rps, p50, p99, count


def post_big(port, body):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    t0 = time.perf_counter()
    conn.request("POST", URI, body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    t = time.perf_counter() - t0
    conn.close()
    if resp.status != 200:
        raise RuntimeError("%d: %r" % (resp.status, data[:200]))
    return t


LOGGED_HTTP = """
    log_format plain escape=json '$remote_addr [$time_local] "$request" '
        '$status $request_time $upstream_response_time';
"""

OPERATED_HTTP = """
    oip_metrics_zone zone=oip_metrics:1m;
    log_format oip escape=json '$remote_addr [$time_local] "$request" '
        '$status $request_time $upstream_response_time '
        'model=$oip_model v=$oip_model_version '
        'id=$oip_request_id inputs=$oip_inputs elements=$oip_elements '
        'bytes=$oip_tensor_bytes in=$oip_in_form up=$oip_upstream_form '
        'convert=$oip_convert_time error="$oip_error"';
"""

PADDED_HTTP = """
    log_format padded escape=json '$remote_addr [$time_local] "$request" '
        '$status $request_time $upstream_response_time '
        'c=$connection n=$connection_requests l=$request_length '
        'b=$bytes_sent bb=$body_bytes_sent t=$msec p=$pipe '
        'port=$server_port cl=$content_length ct=$content_type';
"""

DIGESTED_HTTP = """
    log_format digest '$request_uri $oip_digest';
"""


def main():
    rows = [("plain", "proxy_pass", ""),
            ("keep", "oip on (keep)", "oip on; oip_max_json_size 64m;"),
            ("listed", "oip on (keep), output listed",
             "oip on; oip_max_json_size 64m;"),
            ("signed", "oip on (keep), signatures",
             "oip on; oip_max_json_size 64m; "
             "oip_signatures /_oip_meta zone=models;"),
            ("generated", "generate emulated, signatures",
             "oip on; oip_max_json_size 64m; oip_generate emulate; "
             "oip_signatures /_oip_meta zone=models; "
             "rewrite ^(/v2/models/[^/]+)/infer$ $1/generate break;"),
            ("logged", "keep, access log",
             "oip on; oip_max_json_size 64m; "
             "access_log @DIR@/plain.log plain buffer=64k flush=1s;"),
            ("operated", "keep, access log + oip vars, metrics",
             "oip on; oip_max_json_size 64m; "
             "access_log @DIR@/oip.log oip buffer=64k flush=1s;"),
            ("padded", "keep, access log + 10 vars",
             "oip on; oip_max_json_size 64m; "
             "access_log @DIR@/padded.log padded buffer=64k flush=1s;"),
            ("admitted", "keep, oip_admit never reached",
             "oip on; oip_max_json_size 64m; "
             "oip_admit zone=adm concurrency=100000;"),
            ("binary", "oip_upstream_inputs binary",
             "oip on; oip_upstream_inputs binary; oip_max_json_size 64m;"),
            ("grpc", "binary, to gRPC (ModelInfer)",
             "oip on; oip_upstream_protocol grpc; oip_max_json_size 64m; "
             "oip_grpc_max_message 64m;"),
            ("digested", "binary, $oip_digest logged",
             "oip on; oip_upstream_inputs binary; oip_max_json_size 64m; "
             "access_log @DIR@/digest.log digest buffer=64k flush=1s;")]
    extra_http = {"signed": SIGNED_HTTP, "generated": SIGNED_HTTP,
                  "logged": LOGGED_HTTP,
                  "admitted": "oip_admission_zone zone=adm:1m;",
                  "operated": OPERATED_HTTP, "padded": PADDED_HTTP,
                  "digested": DIGESTED_HTTP, "grpc": GRPC_HTTP}
    if os.path.exists(PEER):
        rows.append(("peer", "OpenResty peer",
                     "access_by_lua_file %s;" % os.path.abspath(PEER)))
    else:
        print("(the OpenResty peer is not at %s: its row is left out; "
              "OIP_PEER_LUA names it)" % PEER)

    work = tempfile.mkdtemp(prefix="oip-bench-")
    small = os.path.join(work, "small.json")
    with open(small, "wb") as f:
        f.write(fp32_json(1024, 1))
    listed = os.path.join(work, "listed.json")
    with open(listed, "wb") as f:
        f.write(fp32_json(1024, 1, ',"outputs":[{"name":"OUTPUT0"}]'))
    body = {key: listed if key == "listed" else small for key, _, _ in rows}
    big = fp32_json(BIG_SIZE, 2)
    # the same values as a generate request: {"INPUT0": [...]}
    body["generated"] = os.path.join(work, "generate.json")
    with open(body["generated"], "wb") as f:
        f.write(as_generate(fp32_json(1024, 1)))
    bigs = {key: as_generate(big) if key == "generated" else big
            for key, _, _ in rows}

    os.chmod(work, 0o755)       # the upstream's worker reads the answer
    with open(os.path.join(work, "answer.grpc"), "wb") as f:
        f.write(grpc_answer())
    up = Server("upstream", UPSTREAM_CONF, answer=ANSWER, metadata=METADATA,
                grpc_port=free_port(), grpc_dir=work, port2=free_port())
    servers = {}
    try:
        for key, _, location in rows:
            main_conf = "load_module %s;" % MODULE
            if key == "peer":
                main_conf = ("load_module %s/ndk_http_module.so;\n"
                             "load_module %s/ngx_http_lua_module.so;"
                             % (LUA_MODULES, LUA_MODULES))
            signed = key in ("signed", "generated")
            passing = ("grpc_pass grpc://grpc_backend;" if key == "grpc"
                       else PROXY_PASS)
            servers[key] = Server(key, CONF, main=main_conf, up=up.port,
                                  location=location, upstream_pass=passing,
                                  http=extra_http.get(key, "").replace(
                                      "@GRPC@", str(up.subst["grpc_port"])),
                                  server=SIGNED_SERVER if signed else "")

        # warm up: every path once, and the answers are right
        for key, _, _ in rows:
            wrk(servers[key].port, body[key], 1)
            post_big(servers[key].port, bigs[key])

        runs = {key: [] for key, _, _ in rows}
        cpu = {key: [0.0, 0] for key, _, _ in rows}
        order = [key for key, _, _ in rows]
        for _ in range(ROUNDS):
            # there and back: a drift of the machine's speed during the
            # round weighs the same on every contender
            got = {key: [] for key in order}
            for key in order + order[::-1]:
                c0 = servers[key].cpu()
                r = wrk(servers[key].port, body[key], TURN)
                cpu[key][0] += servers[key].cpu() - c0
                cpu[key][1] += r[3]
                got[key].append(r[:3])
            for key in order:
                runs[key].append(tuple(statistics.mean(r[i] for r in got[key])
                                       for i in range(3)))

        idle = {key: servers[key].status("VmRSS") for key, _, _ in rows}
        for key, _, _ in rows:
            servers[key].reset_peak()

        times = {key: [] for key, _, _ in rows}
        big_cpu = {key: [] for key, _, _ in rows}
        for _ in range(BIG_RUNS):
            for key, _, _ in rows:
                c0 = servers[key].cpu_ns()
                times[key].append(post_big(servers[key].port, bigs[key]))
                big_cpu[key].append(servers[key].cpu_ns() - c0)

        peak = {key: servers[key].status("VmHWM") for key, _, _ in rows}
    finally:
        for s in servers.values():
            s.stop()
        up.stop()
        shutil.rmtree(work, ignore_errors=True)

    med = {key: statistics.median(times[key]) for key, _, _ in rows}
    med_cpu = {key: statistics.median(big_cpu[key]) for key, _, _ in rows}

    # each contender's run of median rate; ratios to plain proxy_pass
    # taken round by round (the rounds are close in time), their median
    typical = {key: sorted(runs[key])[len(runs[key]) // 2]
               for key, _, _ in rows}
    ratio = {key: statistics.median(a[0] / b[0] for a, b
                                    in zip(runs[key], runs["plain"]))
             for key, _, _ in rows}
    mb = len(big) / 1e6

    print("end to end, 1 worker per gateway, wrk -t1 -c16, 2 x %d s x %d "
          "rounds (median); %.1f MB FP32 JSON x %d (median)"
          % (TURN, ROUNDS, mb, BIG_RUNS))
    print("%-28s | %10s %7s %8s %8s %7s | %9s %9s | %9s %9s %7s"
          % ("", "1 KB req/s", "ratio", "p50 ms", "p99 ms", "cpu us",
             "12 MB ms", "added ms", "idle MB", "peak MB", "/body"))
    for key, label, _ in rows:
        rps, p50, p99 = typical[key]
        print("%-28s | %10.0f %6.2fx %8.2f %8.2f %7.1f | %9.1f %9.1f | "
              "%9.1f %9.1f %6.2fx"
              % (label, rps, ratio[key], p50, p99,
                 cpu[key][0] / cpu[key][1] * 1e6,
                 med[key] * 1e3, (med[key] - med["plain"]) * 1e3,
                 idle[key] / 1024, peak[key] / 1024,
                 peak[key] * 1024 / len(big)))

    fails = 0

    def target(what, value, bound, at_least):
        nonlocal fails
        good = value >= bound if at_least else value <= bound
        fails += not good
        print("  %-56s %6.2f  (%s %.2f)  %s"
              % (what, value, ">=" if at_least else "<=", bound,
                 "ok" if good else "MISSED"))

    print("\ntargets (end to end):")
    target("1 KB req/s, oip on (keep) / proxy_pass", ratio["keep"], 0.95,
           True)
    target("1 KB req/s, oip on (keep), output listed / proxy_pass",
           ratio["listed"], 0.95, True)
    target("1 KB req/s, signatures checked / oip on (keep)",
           statistics.median(a[0] / b[0] for a, b
                             in zip(runs["signed"], runs["keep"])), 0.97,
           True)
    print("  %-56s %6.2f  (no target)"
          % ("1 KB req/s, oip_upstream_inputs binary / proxy_pass",
             ratio["binary"]))
    target("1 KB req/s, oip_admit never reached / oip on (keep)",
           statistics.median(a[0] / b[0] for a, b
                             in zip(runs["admitted"], runs["keep"])), 0.95,
           True)
    target("1 KB req/s, metrics + oip vars logged / access log",
           statistics.median(a[0] / b[0] for a, b
                             in zip(runs["operated"], runs["logged"])), 0.97,
           True)
    # nginx's log costs the same for any ten more fields: this is the
    # part of the figure above the module answers for
    print("  %-56s %6.2f  (no target)"
          % ("1 KB req/s, metrics + oip vars / 10 nginx vars logged",
             statistics.median(a[0] / b[0] for a, b
                               in zip(runs["operated"], runs["padded"]))))
    # the worker's CPU time, which the shared machine disturbs less than
    # the latency (printed too)
    target("12 MB: $oip_digest's worker CPU / the conversion's",
           (med_cpu["digested"] - med_cpu["binary"])
           / max(med_cpu["binary"] - med_cpu["plain"], 1), 0.5, False)
    print("  %-56s %6.2f  (no target)"
          % ("12 MB: $oip_digest's latency / the conversion's",
             (med["digested"] - med["binary"])
             / max(med["binary"] - med["plain"], 1e-9)))
    # issue 15: the same conversion, then gRPC instead of HTTP/1.1
    target("12 MB: latency, REST -> gRPC / REST -> REST binary",
           statistics.median(g / b for g, b
                             in zip(times["grpc"], times["binary"])),
           1.1, False)
    print("  %-56s %6.2f  (no target)"
          % ("12 MB: worker CPU, REST -> gRPC / REST -> REST binary",
             med_cpu["grpc"] / max(med_cpu["binary"], 1)))
    if "peer" in med:
        # issue 14: 1/8 of what the peer adds (0.25 before)
        target("12 MB: latency added, binary / OpenResty peer's",
               (med["binary"] - med["plain"])
               / max(med["peer"] - med["plain"], 1e-9), 0.125, False)
    else:
        # a target that was not measured is not met
        fails += 1
        print("  %-56s %6s  (<= 0.125)  NOT MEASURED: no peer script"
              % ("12 MB: latency added, binary / OpenResty peer's", "-"))
    target("12 MB: worker peak RSS / body, oip on (keep)",
           peak["keep"] * 1024 / len(big), 3, False)
    target("12 MB: worker peak RSS / body, binary",
           peak["binary"] * 1024 / len(big), 3, False)
    # issue 14: no worse than when it was filed (1.76 of the body, the
    # idle worker's 5.0 MB in it).  The idle worker grows with the
    # module's code and moves with the machine (4.8 to 5.1 MB), so the
    # figure held is what the request adds: at most the body and its
    # binary form, which a conversion that does not stream must hold
    # together (16.3 MB of their 16.5 when it was filed)
    data = big[big.index(b'"data":[') + 8:big.rindex(b"]")]
    held = len(big) + 4 * (data.count(b",") + 1)
    target("12 MB: worker peak RSS above idle / (body + binary), binary",
           (peak["binary"] - idle["binary"]) * 1024 / held, 1.0, False)
    print("all targets met" if not fails else "SOME TARGETS MISSED")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
