#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""Priorities under overload (issue 28): the latency of high-priority
requests while low-priority ones flood the model, against their own
latency unloaded, in one run.

The upstream is the example runtime given a fixed service time, as in
bench_admission.py: the model runs on N instances, each request holding
one S seconds (S = 0.05 s, N = 8: capacity N/S = 160 requests a second).
The gateway is a real nginx with 2 workers in front of it:

    oip_admit zone=adm concurrency=N queue=64 wait=5s levels=2

Load: open-loop clients (asyncio, in this process), requests of 1 KB of
FP32 JSON, each with its request-level "priority":

    unloaded   high priority (1) alone at 20% of capacity
    loaded     high priority at 20% and low priority (2) at 380%
    fifo       the same two loads, both without a priority: what the
               high-priority traffic would see without levels (no
               target)

for OIP_PRIO_SECONDS (10) each.  Latency is counted from the time a
request was due; a request not answered 7 s after it was due is given
up.  The low-priority flood rises from 50% of capacity to its rate over
its first OIP_PRIO_RAMP seconds (1), as a flood builds: started at full
rate, its first 8 requests would arrive within 13 ms and set the 8
instances in lockstep, which a fixed service time keeps (each release
hands the instance straight to the next waiter), so that every release
of a 52 ms cycle would come in the same 13 ms and a high-priority
request would wait for that window whatever the queue does: that
measures the bench's start, not the gateway (OIP_PRIO_RAMP=0 shows it).

Targets (issue 28), loaded:
    high-priority p99 <= 1.6 x its p99 unloaded;
    no high-priority request refused (every one a 200).
The exit status says whether they held; a module without oip_admit's
levels (nginx refuses the configuration) counts as missed.

Environment: OIP_PRIO_SECONDS (10), OIP_PRIO_SERVICE (S, 0.05),
OIP_PRIO_INSTANCES (N, 8), OIP_PRIO_RAMP (1), OIP_MODULE (the module;
copied before use).
"""

import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))

from bench_admission import (CONF, BenchRuntime, access_log, conf_error,
                             log_size, module_copy, pct, scheduled)
from bench_e2e import Server, fp32_json
from oiptest import free_port

SECONDS = float(os.environ.get("OIP_PRIO_SECONDS", "10"))
SERVICE = float(os.environ.get("OIP_PRIO_SERVICE", "0.05"))
INSTANCES = int(os.environ.get("OIP_PRIO_INSTANCES", "8"))
CAPACITY = INSTANCES / SERVICE
HIGH, LOW = 0.2, 3.8            # offered loads, times capacity
RAMP = float(os.environ.get("OIP_PRIO_RAMP", "1"))   # seconds
MODEL = "identity"

HTTP = "oip_admission_zone zone=adm:1m;"
LOCATION = ("oip_admit zone=adm concurrency=%d queue=64 wait=5s levels=2;"
            % INSTANCES)
FIELDS = "|$oip_admission|$oip_queue_time|$oip_handover_time"


def with_priority(body, priority):
    """The request with its request-level priority (None: none)."""
    if priority is None:
        return body
    return b'{"parameters":{"priority":%d},' % priority + body[1:]


def dues(rate, seconds, ramp=0.0):
    """When each request of an open loop is due: at a fixed rate, or
    rising linearly from half of capacity to it over ramp seconds."""
    out, t = [], 0.0
    while t < seconds:
        out.append(t)
        r = rate
        if t < ramp:
            r = 0.5 * CAPACITY + (rate - 0.5 * CAPACITY) * t / ramp
        t += 1 / r
    return out


async def together(loads):
    """The loops at once, on the running loop."""
    return await asyncio.gather(*loads)


def stats(records, logged=None):
    ok = [r for r in records if r["status"] == 200]
    lat = [r["latency"] * 1e3 for r in ok]
    out = {"n": len(records), "ok": len(ok),
           "refused": sum(1 for r in records if r["status"] == 429),
           "other": sum(1 for r in records if r["status"] not in (200, 429)),
           "p50": pct(lat, 50), "p99": pct(lat, 99)}
    if logged is not None:
        out["admission"] = {}
        for r in records:
            a = logged.get(r["id"], (None, "-"))[1]
            out["admission"][a] = out["admission"].get(a, 0) + 1
    return out


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    work = tempfile.mkdtemp(prefix="oip-prio-")
    os.chmod(work, 0o755)
    module = module_copy(work)
    body = fp32_json(1024, 1)
    loop = asyncio.new_event_loop()

    err = conf_error(CONF, module=module, up=free_port(), fields=FIELDS,
                     http=HTTP, location=LOCATION)
    if err:
        print("nginx refuses oip_admit with levels: no run\n" + err)
        print("SOME TARGETS MISSED")
        return 1

    runtime = BenchRuntime(work, SERVICE, INSTANCES)
    server = None
    results = {}
    try:
        server = Server("prio", CONF, module=module, up=runtime.port,
                        http=HTTP, location=LOCATION, fields=FIELDS)
        warm = loop.run_until_complete(scheduled(
            server.port, with_priority(body, 1), dues(CAPACITY * 0.5, 1),
            "warm"))
        if any(r["status"] != 200 for r in warm):
            raise RuntimeError("warm-up answered %s"
                               % sorted({r["status"] for r in warm}))

        runs = [("unloaded", [("high", 1, HIGH)]),
                ("loaded", [("high", 1, HIGH), ("low", 2, LOW)]),
                ("fifo", [("high", None, HIGH), ("low", None, LOW)])]
        for n, (run, loads) in enumerate(runs):
            runtime.settle()
            offset = log_size(server)
            groups = loop.run_until_complete(together(
                scheduled(server.port, with_priority(body, prio),
                          dues(factor * CAPACITY, SECONDS,
                               RAMP if factor > 1 else 0),
                          "%s%d" % (tag, n))
                for tag, prio, factor in loads))
            time.sleep(0.3)                 # the last lines of the log
            logged = access_log(server, offset)
            for (tag, _, _), recs in zip(loads, groups):
                results[(run, tag)] = stats(recs, logged)
    finally:
        loop.close()
        if server:
            try:
                server.stop()
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                print("nginx: %s" % e)
        runtime.stop()
        shutil.rmtree(work, ignore_errors=True)

    print("priorities, 2 workers, the example runtime: %s on %d instances "
          "of %.0f ms (capacity %.0f/s); open loop, %g s a run, 1 KB FP32 "
          "JSON; oip_admit concurrency=%d queue=64 wait=5s levels=2"
          % (MODEL, INSTANCES, SERVICE * 1e3, CAPACITY, SECONDS, INSTANCES))
    print("%-9s %-5s %7s | %6s %8s %6s | %8s %8s | %s"
          % ("run", "", "req/s", "200", "429", "other", "p50 ms", "p99 ms",
             "$oip_admission"))
    for (run, tag), r in results.items():
        factor = HIGH if tag == "high" else LOW
        print("%-9s %-5s %7.0f | %6d %8d %6d | %8.1f %8.1f | %s"
              % (run, tag, factor * CAPACITY, r["ok"], r["refused"],
                 r["other"], r["p50"], r["p99"],
                 json.dumps(r["admission"], sort_keys=True)))

    fails = 0

    def target(what, value, bound, at_least=False):
        nonlocal fails
        good = value >= bound if at_least else value <= bound
        fails += not good
        print("  %-56s %7.2f  (%s %.2f)  %s"
              % (what, value, ">=" if at_least else "<=", bound,
                 "ok" if good else "MISSED"))

    high, unloaded = results[("loaded", "high")], results[("unloaded",
                                                          "high")]
    print("\ntargets (priorities, high at %g%% and low at %g%% of "
          "capacity):" % (HIGH * 100, LOW * 100))
    target("high-priority p99 loaded / its p99 unloaded",
           high["p99"] / unloaded["p99"], 1.6)
    target("high-priority requests not answered 200",
           high["n"] - high["ok"], 0)
    fifo = results[("fifo", "high")]
    print("  %-56s %7.2f  (no target)"
          % ("the same without priorities: p99 / unloaded p99",
             fifo["p99"] / unloaded["p99"]))
    print("  %-56s %7.2f  (no target)"
          % ("low priority: 200s a second / capacity",
             results[("loaded", "low")]["ok"] / SECONDS / CAPACITY))
    print("all targets met" if not fails else "SOME TARGETS MISSED")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
