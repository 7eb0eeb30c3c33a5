#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""The bench's figures as PNG plots (Debian's gnuplot), for
docs/performance.md:

    plot.py CURVE MIXED OUTDIR [ADMISSION [SPOOL]]

CURVE: bench_codec's "direction bytes contender MB/s" lines (FP32, 1 KB
to the largest size); MIXED: bench_mixed.py's "contender load p50 p90
p99" lines; ADMISSION (admission.dat beside MIXED unless named):
bench_admission.py's "contender load offered goodput shed p50 p99
urt_p99 concurrent" lines; SPOOL (spool.dat beside MIXED unless named):
bench_spool.py's "path MB growth_MB seconds" lines.  Writes
OUTDIR/codec-throughput.png
(throughput against size, a line per contender, each direction),
OUTDIR/mixed-latency.png (the 1 KB requests' percentiles, alone and
beside big conversions) and OUTDIR/admission.png (goodput and p99
latency against offered load, with and without oip_admit) and
OUTDIR/spool-rss.png (a worker's peak RSS growth against the request's
size, in memory and through files; and of an answer's, held and as it
arrives, or held in memory and in files).  A missing input file leaves its
plot out."""

import os
import subprocess
import sys
import tempfile

CONTENDERS = ["ngx_oip_module", "simdjson", "libc", "cJSON", "memcpy"]
TITLES = {"ngx_oip_module": "ngx_oip_module", "simdjson":
          "simdjson On-Demand", "libc": "strtof / %.9g loop",
          "cJSON": "cJSON", "memcpy": "memcpy (the limit)"}
MIXED = [("plain", "proxy_pass"), ("inline", "oip, in the worker"),
         ("threads", "oip, oip_thread_pool")]


def gnuplot(script):
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def codec(curve, out, work):
    rows = [l.split() for l in open(curve) if l.strip()]
    plots = []
    for direction, title in (("j2b", "JSON -> binary"),
                             ("b2j", "binary -> JSON")):
        lines = []
        for c in CONTENDERS:
            pts = sorted((int(r[1]), float(r[3])) for r in rows
                         if r[0] == direction and r[2] == c)
            if not pts or c == "memcpy":
                continue
            path = os.path.join(work, "%s-%s.dat" % (direction, c))
            with open(path, "w") as f:
                f.writelines("%d %.1f\n" % p for p in pts)
            lines.append("'%s' using ($1/1024):2 with linespoints lw 2 "
                         "title '%s'" % (path, TITLES[c]))
        plots.append("set title '%s, FP32'\nplot %s\n"
                     % (title, ", ".join(lines)))
    gnuplot("""
set terminal pngcairo noenhanced size 1100,450 font ',10'
set output '%s'
set multiplot layout 1,2
set logscale x 4
set xrange [0.7:*]
set xlabel 'JSON size (KB)'
set ylabel 'MB/s of JSON'
set grid
set key top right
set yrange [0:*]
%s
unset multiplot
""" % (out, "".join(plots)))


def mixed(data, out, work):
    rows = {(r[0], r[1]): r[2:] for r in
            (l.split() for l in open(data) if l.strip())}
    path = os.path.join(work, "mixed.dat")
    with open(path, "w") as f:
        for key, label in MIXED:
            for load in ("alone", "loaded"):
                if (key, load) in rows:
                    f.write('"%s\\n%s" %s\n'
                            % (label, "alone" if load == "alone"
                               else "+ 2 x 12.7 MB loops",
                               " ".join(rows[(key, load)])))
    gnuplot("""
set terminal pngcairo noenhanced size 1100,480 font ',10'
set output '%s'
set bmargin 5
set offsets 0, 0, graph 0.08, 0
set title '1 KB FP32 requests at about 500/s, 2 workers: latency'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel 'ms'
set grid ytics
set key top left
set yrange [0:*]
plot '%s' using 2:xtic(1) title 'p50', '' using 3 title 'p90', \\
     '' using 4 title 'p99'
""" % (out, path))


ADMISSION = [("gateway", "oip on, no admission"),
             ("admit", "oip on, oip_admit concurrency=N")]


def admission(data, out, work):
    rows = [l.split() for l in open(data)
            if l.strip() and not l.startswith("#")]
    direct = [r for r in rows if r[0] == "direct"]
    if not direct:
        return
    # direct: N closed-loop clients; its offered column is N/S
    capacity, direct_p99 = float(direct[0][2]), float(direct[0][6])
    lines = {"goodput": [], "p99": []}
    for key, label in ADMISSION:
        pts = sorted((float(r[2]), r) for r in rows if r[0] == key)
        if not pts:
            continue
        path = os.path.join(work, "admission-%s.dat" % key)
        with open(path, "w") as f:
            for offered, r in pts:
                f.write("%s %s %s %s\n" % (offered, r[3], r[6],
                                           r[7] if r[7] != "-" else "NaN"))
        color = len(lines["goodput"]) + 1
        lines["goodput"].append("'%s' using 1:2 with linespoints lw 2 "
                                "lc %d title '%s'" % (path, color, label))
        lines["p99"].append("'%s' using 1:3 with linespoints lw 2 "
                            "lc %d title '%s: client'"
                            % (path, color, label))
        lines["p99"].append("'%s' using 1:4 with linespoints lw 2 dt 2 "
                            "lc %d title '%s: upstream'"
                            % (path, color, label))
    if not lines["goodput"]:
        return
    gnuplot("""
set terminal pngcairo noenhanced size 1100,450 font ',10'
set output '%s'
set multiplot layout 1,2
set xlabel 'offered load (requests/s, open loop)'
set grid
set key bottom right
set xrange [0:*]
set title 'goodput (200 answers/s)'
set ylabel 'requests/s'
set yrange [0:%f]
plot %s, %f with lines dt 3 lc rgb 'black' title 'capacity N/S'
set title 'latency of the 200s, p99: at the client, and upstream'
set ylabel 'ms'
set logscale y
set yrange [*:*]
plot %s, %f with lines dt 3 lc rgb 'black' \\
     title 'N closed-loop clients, direct: p99'
unset multiplot
""" % (out, capacity * 1.3, ", ".join(lines["goodput"]), capacity,
       ", ".join(lines["p99"]), direct_p99))


SPOOL = [("memory", "JSON request made binary, in memory"),
         ("spool", "... through files (oip_buffer 16m)"),
         ("aheld", "binary answer made JSON, held whole"),
         ("aflow", "... as it arrives (oip_buffer 16m)"),
         ("gzmemory", "gzip request, inflated in memory"),
         ("gzspool", "... inflated to a file (oip_buffer 16m)"),
         ("ajmem", "JSON answer made binary, held in memory"),
         ("ajfile", "... held in files (oip_buffer 16m)"),
         ("ammem", "mixed answer, its JSON header in memory"),
         ("amfile", "... in a file of its own (oip_buffer 16m)"),
         ("gmemory", "JSON request made gRPC, in memory"),
         ("grpc", "... its raw contents from a file (oip_buffer 16m)"),
         ("gtmemory", "INT32 request made gRPC typed, in memory"),
         ("gtyped", "... read back through files (oip_buffer 16m)")]


def spool(data, out, work):
    rows = [l.split() for l in open(data) if l.strip()]
    plots = []
    for key, label in SPOOL:
        pts = sorted((int(r[1]), r[2]) for r in rows if r[0] == key)
        if not pts:
            continue
        path = os.path.join(work, "spool-%s.dat" % key)
        with open(path, "w") as f:
            for mb, growth in pts:
                # a log scale: no growth (or a drop, memory given back
                # before the peak was read) is drawn at 0.1 MB
                f.write("%d %.1f\n" % (mb, max(float(growth), 0.1)))
        plots.append("'%s' using 1:2 with linespoints lw 2 title '%s'"
                     % (path, label))
    if not plots:
        return
    gnuplot("""
set terminal pngcairo noenhanced size 900,560 font ',10'
set output '%s'
set title 'a worker converting one request or answer (0.1: none)'
set xlabel 'body (MB)'
set ylabel 'peak RSS growth (MB)'
set logscale xy
set xrange [10:2000]
set yrange [0.05:20000]
set grid
set key outside right top
plot %s, 64 with lines dt 3 lc rgb 'black' title 'the bound: 64 MB'
""" % (out, ", ".join(plots)))


def main():
    curve, mixed_data, outdir = sys.argv[1:4]
    admission_data = sys.argv[4] if len(sys.argv) > 4 else os.path.join(
        os.path.dirname(os.path.abspath(mixed_data)), "admission.dat")
    os.makedirs(outdir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="oip-plot-")
    if os.path.exists(curve):
        codec(curve, os.path.join(outdir, "codec-throughput.png"), work)
    if os.path.exists(mixed_data):
        mixed(mixed_data, os.path.join(outdir, "mixed-latency.png"), work)
    if os.path.exists(admission_data):
        admission(admission_data, os.path.join(outdir, "admission.png"),
                  work)
    spool_data = sys.argv[5] if len(sys.argv) > 5 else os.path.join(
        os.path.dirname(os.path.abspath(mixed_data)), "spool.dat")
    if os.path.exists(spool_data):
        spool(spool_data, os.path.join(outdir, "spool-rss.png"), work)


if __name__ == "__main__":
    main()
