#!/usr/bin/env bash
#
# ngx_oip_module: install what is missing, build, run, test.
#
#   ./build.sh build    the module, against Debian's nginx:
#                       build/ngx_http_oip_module.so
#   ./build.sh run      the gateway with the example runtime on
#                       127.0.0.1:8000 (Ctrl-C stops both)
#   ./build.sh check    the quick check, for the edit-test loop: unit
#                       tests, the build's shape, the integration tests
#   ./build.sh test     the whole suite: every pass of the test matrix
#                       (t/run.sh); non-zero on any failure
#   ./build.sh fuzz     each fuzz target for FUZZ_RUNS (10 million)
#   ./build.sh soak     the load test for OIP_SOAK_SECONDS (600)
#   ./build.sh bench    the speed and memory benchmarks and their targets
#   ./build.sh deb      the Debian package, built with dh_nginx, checked
#                       by lintian, installed, used and purged in a clean
#                       Debian 12 root: build/libnginx-mod-http-oip_*.deb
#   ./build.sh nginx-next  the integration tests through a second nginx
#                       (1.26.3, from Debian 13's source); part of test
#   ./build.sh image    the package (as deb does), then the container
#                       image (docs/deploy/image/) built with podman and
#                       run: a request through it; tagged ngx-oip:<version>
#
# check and test take test files to run only those:
#   ./build.sh check t/integration/test_faults.py
#
# Runs as root on Debian 12; installs Debian packages only if missing.
# What the tests run, and through which builds, is t/run.sh's (the test
# matrix; docs/testing.md, "Passes"); this file installs and builds.
# The codec's own programs are built by t/Makefile, from the same list
# of codec files as the module (ngx_oip_module/codec/sources).

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD="$ROOT/build"
NGX_SRC=/usr/share/nginx/src
PY=/usr/bin/python3
MAKE_T=(make -s -j2 -f "$ROOT/t/Makefile")

# what building and testing need, as Debian packages
PKGS_BUILD=(nginx nginx-dev gcc make libc6-dev zlib1g-dev libssl-dev
            libpcre2-dev binutils)
PKGS_TEST=(python3 curl perl valgrind wrk clang-14 libclang-rt-14-dev locales
           python3-prometheus-client prometheus python3-yaml
           python3-grpcio python3-protobuf protobuf-compiler
           protobuf-compiler-grpc)
# the Debian package: Debian's own tooling (dh_nginx is in nginx-dev)
PKGS_DEB=(debhelper dpkg-dev fakeroot lintian mmdebstrap python3)
# the container image (runc: see t/package/test_image.py)
PKGS_IMAGE=(podman runc mmdebstrap python3)
# the second nginx: its source from Debian's archive, the libraries
# Debian's configure flags ask for
PKGS_NEXT=(dpkg-dev libssl-dev libpcre2-dev zlib1g-dev curl)
# the bench's baselines (cJSON, simdjson), the OpenResty peer, the plots
PKGS_BENCH=(libcjson-dev libnginx-mod-http-lua lua-cjson libsimdjson-dev g++
            gnuplot-nox)

START=$SECONDS

say() { printf '==> %s\n' "$*" >&2; }

# a phase of a run, with the time the run has taken so far
phase() { say "$* [$((SECONDS - START)) s]"; }

install_pkgs() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null \
            | grep -q 'install ok installed' || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    say "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y --no-install-recommends "${missing[@]}" \
            >/dev/null; then
        apt-get update >/dev/null
        apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
    fi
}

# Debian starts nginx when it is installed; the tests want port 80 quiet.
stop_system_nginx() {
    if [ -f /run/nginx.pid ] && kill -0 "$(cat /run/nginx.pid)" 2>/dev/null
    then
        say "stopping the system nginx started by its package"
        kill -QUIT "$(cat /run/nginx.pid)" 2>/dev/null || true
    fi
}

# build_module DIR EXTRA_CFLAGS EXTRA_LDFLAGS: the module in $BUILD/DIR,
# against Debian's nginx (Debian's own method, see NGINX_NOTES), and a
# copy at $BUILD/DIR.so
build_module() {
    local dir="$BUILD/$1" stamp sum
    stamp="$dir/.configured"
    sum=$(cat "$ROOT/config" "$ROOT/ngx_oip_module/codec/sources" \
          | md5sum | cut -d' ' -f1)

    # configure only when the file lists changed: it takes seconds
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$sum" ]; then
        say "configuring $1 against $(/usr/sbin/nginx -v 2>&1)"
        rm -rf "$dir"
        mkdir -p "$dir"
        (cd "$NGX_SRC" && bash -c '. ./conf_flags; ./configure \
            --with-cc-opt="$(dpkg-buildflags --get CFLAGS) -fPIC $(dpkg-buildflags --get CPPFLAGS) $2" \
            --with-ld-opt="$(dpkg-buildflags --get LDFLAGS) -fPIC $3" \
            "${NGX_CONF_FLAGS[@]}" \
            --add-dynamic-module="$0" --builddir="$1"' \
            "$ROOT" "$dir" "$2" "$3") > "$dir.configure.log" 2>&1 || {
            tail -20 "$dir.configure.log" >&2
            exit 1
        }
        echo "$sum" > "$stamp"
    fi

    make -s -j2 -f "$dir/Makefile" -C "$NGX_SRC" modules \
        > "$dir.make.log" 2>&1 || { cat "$dir.make.log" >&2; exit 1; }

    # a running nginx has the old file mapped: writing over it in place
    # kills its workers, a rename leaves it theirs
    cp "$dir/ngx_http_oip_module.so" "$dir.so.tmp.$$"
    mv -f "$dir.so.tmp.$$" "$dir.so"
}

do_build() {
    install_pkgs "${PKGS_BUILD[@]}"
    stop_system_nginx
    mkdir -p "$BUILD"

    phase "building the module"
    build_module nginx "" ""
    mv -f "$BUILD/nginx.so" "$BUILD/ngx_http_oip_module.so"
}

# run_py LABEL FILES...: Python test files, in the environment the caller
# set (OIP_MODULE, OIP_NGINX_ENV, OIP_NGINX_WRAP)
run_py() {
    local label=$1 t log failed=() t0
    shift
    phase "$label"
    mkdir -p "$BUILD/logs"
    for t in "$@"; do
        log="$BUILD/logs/$(basename "$t" .py).${label//[^a-zA-Z0-9]/-}.log"
        printf '%s ... ' "${t#"$ROOT"/}" >&2
        t0=$SECONDS
        if "$PY" "$t" > "$log" 2>&1; then
            echo "ok ($(grep -Eo '^Ran [0-9]+ tests?' "$log" \
                | cut -d' ' -f2) tests, $((SECONDS - t0)) s)" >&2
        else
            echo "FAILED" >&2
            cat "$log" >&2
            failed+=("$t")
        fi
    done
    [ ${#failed[@]} -eq 0 ] || { say "failed: ${failed[*]}"; return 1; }
}

do_run() {
    do_build
    install_pkgs "${PKGS_TEST[@]}"

    local dir="$BUILD/run" rt ngx
    mkdir -p "$dir/logs"
    chmod 755 "$dir"

    "$PY" "$ROOT/t/runtime/oip_runtime.py" --port 8001 &
    rt=$!
    # gRPC, for the streams: identity and identity_fp32 answer 5 times,
    # 0.3 s apart
    "$PY" "$ROOT/t/runtime/oip_grpc_runtime.py" --port 8002 \
        --decoupled identity:5:0.3 --decoupled identity_fp32:5:0.3 &
    rt="$rt $!"
    /usr/sbin/nginx -p "$dir/" -c "$ROOT/docs/examples/demo.conf" \
        -e "$dir/logs/error.log" \
        -g "load_module $BUILD/ngx_http_oip_module.so; daemon off;" &
    ngx=$!

    trap 'kill $ngx $rt 2>/dev/null; wait $ngx $rt 2>/dev/null; \
          say "stopped"; exit 0' INT TERM

    sleep 1
    kill -0 $ngx 2>/dev/null || { say "nginx did not start"; \
        cat "$dir/logs/error.log" >&2; kill $rt; exit 1; }

    cat <<'EOT'

The gateway listens on http://127.0.0.1:8000 (nginx + ngx_oip_module),
in front of the example runtime on 127.0.0.1:8001 (Triton's rules), and
of the example gRPC runtime on 127.0.0.1:8002 for streams.
Try, from another terminal:

# a JSON request, sent on to the runtime as binary tensor data
curl -s http://127.0.0.1:8000/v2/models/simple/infer -d '{"inputs":[
  {"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]]},
  {"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]]}]}'

# INT64 at both ends of its range, exact through the conversion
curl -s http://127.0.0.1:8000/v2/models/identity/infer -d '{"inputs":[
  {"name":"INPUT0","shape":[2],"datatype":"INT64","data":[9223372036854775807,-9223372036854775808]}]}'

# FP16 both ways: JSON in, binary to the runtime and back, JSON out
curl -s http://127.0.0.1:8000/v2/models/identity/infer -d '{"inputs":[
  {"name":"INPUT0","shape":[3],"datatype":"FP16","data":[1.0,0.1,65504]}]}'

# the server's metadata, through the gateway
curl -s http://127.0.0.1:8000/v2

# a stream: each of a decoupled model's answers an event, as it comes
curl -sN http://127.0.0.1:8000/v2/models/identity/infer_stream -d '{"inputs":[
  {"name":"INPUT0","shape":[2],"datatype":"FP16","data":[0.5,2]}]}'

# generate_stream, which the gRPC runtime does not have: emulated
curl -sN http://127.0.0.1:8000/v2/models/identity_fp32/generate_stream -d '{"INPUT0":[0.5,2]}'

# a bad request is stopped at the edge with a precise error
curl -s -i http://127.0.0.1:8000/v2/models/simple/infer -d '{"inputs":[
  {"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[1,2,3]}]}'

Ctrl-C stops them all.
EOT
    wait $ngx
}

# the load test, long: OIP_SOAK_SECONDS (600) of mixed load on 2 workers
do_soak() {
    do_build
    install_pkgs "${PKGS_TEST[@]}"
    phase "soak: ${OIP_SOAK_SECONDS:-600} s of load, RSS read each minute"
    OIP_SOAK_SECONDS=${OIP_SOAK_SECONDS:-600} \
        "$PY" "$ROOT/t/load/test_load.py" 2>&1 | tee "$BUILD/soak.log"
    return "${PIPESTATUS[0]}"
}

# The benchmarks: number correctness on a large sample, the codec against
# cJSON, libc loops and memcpy, then end to end through nginx against
# plain proxy_pass and the OpenResty peer.  Targets are ratios within the
# run; the exit status says whether they all held.
do_bench() {
    local rc=0 bin="$BUILD/bench"

    do_build
    install_pkgs "${PKGS_TEST[@]}" "${PKGS_BENCH[@]}"
    stop_system_nginx
    "${MAKE_T[@]}" bench

    phase "numbers on a large sample (OIP_NUMBER_SCALE=${OIP_NUMBER_SCALE:-30})"
    OIP_NUMBER_SCALE=${OIP_NUMBER_SCALE:-30} prove -e '' "$bin/test_number" \
        || rc=1

    phase "the codec: ${OIP_BENCH_BUDGET:-0.4} s a figure," \
          "up to ${OIP_BENCH_MB:-40} MB"
    OIP_BENCH_DATA="$bin/curve.dat" \
        "$bin/bench_codec" "${OIP_BENCH_BUDGET:-0.4}" "${OIP_BENCH_MB:-40}" \
        || rc=1

    phase "end to end through nginx"
    "$PY" "$ROOT/t/bench/bench_e2e.py" || rc=1

    phase "mixed load: small requests while big tensors convert"
    OIP_BENCH_MIXED_DATA="$bin/mixed.dat" \
        "$PY" "$ROOT/t/bench/bench_mixed.py" || rc=1

    phase "admission control: open-loop load, with and without oip_admit"
    OIP_ADMIT_DATA="$bin/admission.dat" \
        "$PY" "$ROOT/t/bench/bench_admission.py" || rc=1

    phase "priorities: high-priority latency under a low-priority flood"
    "$PY" "$ROOT/t/bench/bench_priority.py" || rc=1

    phase "stateful sequences: two gateways, runtimes reloaded and killed"
    "$PY" "$ROOT/t/bench/bench_sequence.py" || rc=1

    phase "streams: latency against the runtime direct, 1000 at once"
    "$PY" "$ROOT/t/bench/bench_stream.py" || rc=1

    phase "tensors of any size: 16 MB to 1 GB requests, in memory and" \
          "through files"
    OIP_SPOOL_DATA="$bin/spool.dat" \
        "$PY" "$ROOT/t/bench/bench_spool.py" || rc=1

    phase "instructions a 1 KB request costs (callgrind, about 15 minutes)"
    "$PY" "$ROOT/t/bench/bench_instructions.py" || rc=1

    phase "the plots: docs/figures/"
    "$PY" "$ROOT/t/bench/plot.py" "$bin/curve.dat" "$bin/mixed.dat" \
        "$ROOT/docs/figures"

    [ $rc -eq 0 ] && say "bench: all targets met" \
                  || say "bench: some targets missed (above)"
    return $rc
}

# The package is built from a copy of the tracked files (debian/ is the
# packaging, docs/packaging.md says why it is there), as Debian builds
# a source package: dh_nginx configures nginx's source with the copy as
# its dynamic module, runs nginx -t on the result, and writes the
# modules-available file and the maintainer scripts.
do_deb() {
    local dir="$BUILD/deb" deb
    install_pkgs "${PKGS_BUILD[@]}" "${PKGS_DEB[@]}"
    rm -rf "$dir"
    mkdir -p "$dir/src"
    git -C "$ROOT" ls-files -z \
        | (cd "$ROOT" && tar -c --null --ignore-failed-read -T -) \
        | tar -x -C "$dir/src"
    phase "building the Debian package (dpkg-buildpackage, dh_nginx)"
    (cd "$dir/src" && dpkg-buildpackage -us -uc -b) > "$dir/build.log" 2>&1 \
        || { tail -40 "$dir/build.log" >&2; say "failed: $dir/build.log"
             exit 1; }
    deb=$(ls "$dir"/libnginx-mod-http-oip_*.deb)
    # one package file: the image's Containerfile takes what is there
    rm -f "$BUILD"/libnginx-mod-http-oip_*.deb
    cp "$deb" "$BUILD/"
    phase "lintian"
    lintian --fail-on error,warning "$dir"/libnginx-mod-http-oip_*.changes
    phase "installed in a clean Debian 12 root (mmdebstrap), used, purged"
    run_py "the package in a clean root" "$ROOT/t/package/test_install.py"
    phase "built and tested: build/$(basename "$deb")"
}

# The image, built from the package as the Containerfile's header tells
# a user, tested running (t/package/test_image.py), then tagged for use.
do_image() {
    local version
    do_deb
    install_pkgs "${PKGS_IMAGE[@]}"
    version=$(dpkg-parsechangelog -l "$ROOT/debian/changelog" -S Version)
    OIP_IMAGE_TAG="localhost/ngx-oip:$version" \
        run_py "the container image: built with podman, run, a request \
through it" "$ROOT/t/package/test_image.py"
    phase "built and tested: localhost/ngx-oip:$version"
}

usage() {
    sed -n '3,33p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
}

# t/run.sh takes the functions above; the commands are below
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

cmd=${1:-}
[ $# -gt 0 ] && shift

case "$cmd" in
    build) do_build ;;
    run) do_run ;;
    check|test|fuzz) exec "$ROOT/t/run.sh" "$cmd" "$@" ;;
    nginx-next) exec "$ROOT/t/run.sh" next "$@" ;;
    soak) do_soak ;;
    bench) do_bench ;;
    deb) do_deb ;;
    image) do_image ;;
    *) usage ;;
esac
