#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""Streams (issue 30), in one run, in front of the example gRPC runtime's
decoupled model (Triton's ModelStreamInfer, /_test/decoupled), each
answer stamped with the time it left the runtime (parameter sent_ns).

1. Latency, one stream at a time: 100 answers 10 ms apart, read by a
   gRPC client straight from the runtime and by an HTTP client through
   the gateway (1 worker, infer_stream as server-sent events), in
   alternating rounds.  Time to first event: from the request's first
   byte to the first answer read; per-event delay: from its stamp to
   its reading.  The gateway's cost is the difference of the medians
   (and of the 99th percentiles) of the two ways.
2. Cancellation: from a client's close to the runtime's seeing its call
   end (its own count, polled), for a gRPC stream, a unary gRPC call
   and an HTTP runtime's (MLServer's) stream.
3. Many streams: OIP_STREAM_CONCURRENT (1000) streams at once through 2
   workers, 50 answers 200 ms apart each, read by one asyncio client:
   every stream must get its 50 events, each once and in order; the
   workers' RSS (the sum of VmRSS) while they are all open, minus the
   same after a warm-up stream, divided by the streams.

Targets (issue 30):
    time to first event, gateway - direct, median <= 2 ms;
    per-event delay, gateway - direct: p50 <= 0.5 ms, p99 <= 2 ms;
    a client's close cancels the runtime's call within 100 ms;
    many streams: 0 events lost or reordered; RSS per open stream
      <= 64 KB.
The exit status says whether they held.

Environment: OIP_STREAM_CONCURRENT (1000), OIP_STREAM_EVENTS (50),
OIP_STREAM_ROUNDS (7), OIP_MODULE (the module).
"""

import asyncio
import json
import os
import resource
import socket
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

import urllib.request

from oiptest import GrpcRuntime, Nginx, Runtime

CONCURRENT = int(os.environ.get("OIP_STREAM_CONCURRENT", "1000"))
EVENTS = int(os.environ.get("OIP_STREAM_EVENTS", "50"))
ROUNDS = int(os.environ.get("OIP_STREAM_ROUNDS", "7"))
MODEL = "identity"
URI = "/v2/models/%s/infer_stream" % MODEL
BODY = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32",
                               "shape": [4], "data": [1, 2, 3, 4]}]})


def gateway(rt, workers, connections=1024):
    return Nginx("", conf="""
worker_processes %d;
worker_rlimit_nofile %d;
pid @DIR@/nginx.pid;
error_log @DIR@/error.log error;
load_module @MODULE@;

events {
    worker_connections %d;
}

http {
    access_log off;
    client_body_temp_path @DIR@/client_body;

    server {
        listen 127.0.0.1:@PORT@ backlog=4096;

        location /v2/ {
            oip on;
            oip_upstream_protocol grpc;
            grpc_read_timeout 120s;
            grpc_pass grpc://127.0.0.1:%d;
        }
    }
}
""" % (workers, 2 * connections + 256, connections, rt.port))


def events(buf):
    """The whole events at the start of buf, read, and what is left."""
    docs = []
    while True:
        i = buf.find(b"data: ")
        j = buf.find(b"\n\n", i)
        if i < 0 or j < 0:
            return docs, buf
        docs.append(json.loads(buf[i + 6:j]))
        buf = buf[j + 2:]


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


# 1. latency

def direct_stream(stub, pb):
    """(time to the first answer, [per-answer delays]), in seconds."""
    req = pb.ModelInferRequest(model_name=MODEL)
    t = req.inputs.add(name="INPUT0", datatype="FP32", shape=[4])
    t.contents.fp32_contents.extend([1, 2, 3, 4])
    start = time.time_ns()
    first, delays = None, []
    for resp in stub.ModelStreamInfer(iter([req])):
        now = time.time_ns()
        if first is None:
            first = now - start
        sent = resp.infer_response.parameters["sent_ns"].int64_param
        delays.append(now - sent)
    return first / 1e9, [d / 1e9 for d in delays]


def gateway_stream(port):
    """The same through the gateway: a raw HTTP/1.1 request, its
    server-sent events read as they come."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    data = BODY.encode()
    req = (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
           b"Connection: close\r\n\r\n%s" % (URI.encode(), len(data), data))
    start = time.time_ns()
    s.sendall(req)
    first, delays, buf = None, [], b""
    while True:
        chunk = s.recv(65536)
        now = time.time_ns()
        if not chunk:
            break
        buf += chunk
        docs, buf = events(buf)
        for doc in docs:
            if first is None:
                first = now - start
            delays.append(now - doc["parameters"]["sent_ns"])
    s.close()
    return first / 1e9, [d / 1e9 for d in delays]


def latency():
    """(targets held?, lines)"""
    import grpc
    sys.path.insert(0, GrpcRuntime.STUBS)
    rt = GrpcRuntime()
    ngx = None
    try:
        import grpc_predict_v2_pb2 as pb
        import grpc_predict_v2_pb2_grpc as pbg
        rt.hook("PUT", "/_test/decoupled/%s" % MODEL,
                {"responses": 100, "spacing": 0.01, "stamp": True})
        ngx = gateway(rt, 1)
        channel = grpc.insecure_channel("127.0.0.1:%d" % rt.port)
        stub = pbg.GRPCInferenceServiceStub(channel)
        direct_stream(stub, pb)                     # warm up both
        gateway_stream(ngx.port)
        ttfe = {"direct": [], "gateway": []}
        delay = {"direct": [], "gateway": []}
        for _ in range(ROUNDS):
            for way in ("direct", "gateway"):
                f, d = (direct_stream(stub, pb) if way == "direct"
                        else gateway_stream(ngx.port))
                assert len(d) == 100, (way, len(d))
                ttfe[way].append(f)
                delay[way] += d
        channel.close()
    finally:
        if ngx:
            ngx.stop()
        rt.stop()

    ms = 1000.0
    t_diff = (statistics.median(ttfe["gateway"])
              - statistics.median(ttfe["direct"])) * ms
    p50 = (percentile(delay["gateway"], 0.5)
           - percentile(delay["direct"], 0.5)) * ms
    p99 = (percentile(delay["gateway"], 0.99)
           - percentile(delay["direct"], 0.99)) * ms
    lines = ["one stream, %d rounds of 100 answers 10 ms apart:" % ROUNDS]
    for way in ("direct", "gateway"):
        lines.append("  %-8s time to first event median %.2f ms; per-event "
                     "delay p50 %.3f ms, p99 %.3f ms"
                     % (way, statistics.median(ttfe[way]) * ms,
                        percentile(delay[way], 0.5) * ms,
                        percentile(delay[way], 0.99) * ms))
    held = t_diff <= 2 and p50 <= 0.5 and p99 <= 2
    return held, t_diff, p50, p99, lines


# 3. cancellation

def cancel_latency():
    """How long from a client's close to the runtime's seeing its call
    end, for a gRPC stream, a unary gRPC call and an HTTP (MLServer)
    stream: the median of 5 each, in ms (the runtime's count is polled
    every millisecond or so)."""
    grt = GrpcRuntime()
    hrt = Runtime("mlserver")
    ngx = None
    out = {}
    try:
        ngx = Nginx("", conf="""
worker_processes 1;
pid @DIR@/nginx.pid;
error_log @DIR@/error.log error;
load_module @MODULE@;
events { }
http {
    access_log off;
    client_body_temp_path @DIR@/client_body;
    server {
        listen 127.0.0.1:@PORT@;
        location /grpc/ {
            oip on;
            oip_upstream_protocol grpc;
            rewrite ^/grpc(/.*)$ $1 break;
            grpc_pass grpc://127.0.0.1:%d;
        }
        location /http/ {
            oip on;
            oip_upstream_inputs json;
            rewrite ^/http(/.*)$ $1 break;
            proxy_pass http://127.0.0.1:%d;
        }
    }
}
""" % (grt.port, hrt.port))
        grt.hook("PUT", "/_test/decoupled/%s" % MODEL,
                 {"responses": 1000, "spacing": 0.05})
        hook = "http://127.0.0.1:%d/_test/" % hrt.port
        urllib.request.urlopen(urllib.request.Request(
            hook + "streaming/" + MODEL, method="PUT",
            data=json.dumps({"responses": 1000, "spacing": 0.05})
            .encode())).read()

        def grpc_count():
            return grt.hook("GET", "/_test/cancelled")["calls"]

        def http_count():
            with urllib.request.urlopen(hook + "counts") as r:
                return json.loads(r.read())["gone"].get(MODEL, 0)

        cases = [("gRPC stream", "/grpc" + URI, grpc_count, b"data: "),
                 ("gRPC unary", "/grpc/v2/models/%s/infer" % MODEL,
                  grpc_count, None),
                 ("HTTP stream (MLServer)", "/http" + URI, http_count,
                  b"data: ")]
        for name, path, count, wait_for_data in cases:
            times = []
            for _ in range(5):
                if wait_for_data is None:
                    grt.hook("PUT", "/_test/fault",
                             {"mode": "slow", "seconds": 30, "times": 1})
                before = count()
                s = socket.create_connection(("127.0.0.1", ngx.port))
                data = BODY.encode()
                s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Length: %d\r\n\r\n%s"
                          % (path.encode(), len(data), data))
                if wait_for_data:
                    got = b""
                    while wait_for_data not in got:
                        got += s.recv(65536)
                else:
                    time.sleep(0.3)
                start = time.time()
                s.close()
                while count() == before and time.time() - start < 5:
                    time.sleep(0.001)
                times.append((time.time() - start) * 1000)
            out[name] = statistics.median(times)
    finally:
        if ngx:
            ngx.stop()
        grt.stop()
        hrt.stop()
    return out


# 2. many streams

def rss_kb(ngx):
    total = 0
    for pid in ngx.workers():
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


async def one_stream(port, got, opened):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    data = BODY.encode()
    w.write(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n%s" % (URI.encode(), len(data), data))
    await w.drain()
    buf, seen, first = b"", [], True
    while True:
        chunk = await r.read(65536)
        if not chunk:
            break
        buf += chunk
        docs, buf = events(buf)
        for doc in docs:
            seen += [o["data"][0] for o in doc.get("outputs", [])
                     if o["name"] == "INDEX"]
            if first:
                first = False
                opened.append(1)
    w.close()
    got.append(seen)


async def many(port, ngx):
    got, opened = [], []
    tasks = [asyncio.ensure_future(one_stream(port, got, opened))
             for _ in range(CONCURRENT)]
    # every stream open and flowing: the workers' memory then
    while len(opened) < CONCURRENT and not all(t.done() for t in tasks):
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    rss = rss_kb(ngx)
    await asyncio.gather(*tasks)
    return got, rss


async def warm_up(port):
    await asyncio.gather(*[one_stream(port, [], []) for _ in range(8)])


def streams():
    """(targets held?, lines)"""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 4 * CONCURRENT + 256
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(need,
                                                                  soft)),
                                                    hard))
    rt = GrpcRuntime(["--workers", str(CONCURRENT + 16)])
    ngx = None
    try:
        ngx = gateway(rt, 2, 2 * CONCURRENT + 64)
        # a few warm-up streams, in both workers, then the idle figure
        rt.hook("PUT", "/_test/decoupled/%s" % MODEL, {"responses": 2})
        asyncio.run(warm_up(ngx.port))
        idle = rss_kb(ngx)
        rt.hook("PUT", "/_test/decoupled/%s" % MODEL,
                {"responses": EVENTS, "spacing": 0.2})
        start = time.time()
        got, rss = asyncio.run(many(ngx.port, ngx))
        took = time.time() - start
    finally:
        if ngx:
            ngx.stop()
        rt.stop()

    want = list(range(EVENTS))
    bad = sum(1 for g in got if g != want)
    lost = sum(EVENTS - len(g) for g in got if len(g) < EVENTS)
    per = (rss - idle) / CONCURRENT
    lines = ["%d streams of %d answers 200 ms apart, 2 workers: %.1f s; "
             "streams not whole and in order %d (events missing %d); "
             "workers' RSS %d KB idle, %d KB with all open: %.1f KB a "
             "stream" % (CONCURRENT, EVENTS, took, bad, lost, idle, rss,
                         per)]
    return bad == 0 and len(got) == CONCURRENT, per, lines


def main():
    held1, t_diff, p50, p99, lines = latency()
    for line in lines:
        print(line)
    cancels = cancel_latency()
    print("a client's close to its runtime's call ended (median of 5): "
          + ", ".join("%s %.1f ms" % kv for kv in cancels.items()))
    held2, per, lines = streams()
    for line in lines:
        print(line)
    print("\ntargets (issue 30):")
    print("  time to first event, gateway - direct %.2f ms (<= 2)    %s"
          % (t_diff, "ok" if t_diff <= 2 else "MISSED"))
    print("  per-event delay p50, gateway - direct %.3f ms (<= 0.5) %s"
          % (p50, "ok" if p50 <= 0.5 else "MISSED"))
    print("  per-event delay p99, gateway - direct %.3f ms (<= 2)   %s"
          % (p99, "ok" if p99 <= 2 else "MISSED"))
    print("  %d streams: none lost or reordered                    %s"
          % (CONCURRENT, "ok" if held2 else "MISSED"))
    print("  RSS per open stream %.1f KB (<= 64)                      %s"
          % (per, "ok" if per <= 64 else "MISSED"))
    late = max(cancels.values())
    print("  cancelled within %.1f ms (<= 100)                       %s"
          % (late, "ok" if late <= 100 else "MISSED"))
    ok = held1 and held2 and per <= 64 and late <= 100
    print("all targets met" if ok else "SOME TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
