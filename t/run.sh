#!/usr/bin/env bash
#
# Copyright (C) ngx_oip_module authors
#
# The test matrix: which builds, which suites through which nginx, with
# which sanitizer.  build.sh calls it (check, test, fuzz, nginx-next);
# by hand: t/run.sh check [FILES...].
#
#   check   the release module (build.sh's build); the codec's unit
#           tests (ASan+UBSan), its reentrancy test (TSan), the build's
#           shape; the integration tests                     pass "plain"
#   test    check, then:
#           nginx 1.26.3 built from Debian 13's source with the module,
#           the module against 1.26.3 without threads (compiled)
#           the integration tests through 1.26.3             pass "next"
#           each fuzz target for FUZZ_SECONDS (20), then the ASan
#           build, beside that pass
#           the load test                                    pass "plain"
#           the module with ASan+UBSan, integration and load pass "asan"
#           nginx under valgrind memcheck, the same          pass "valgrind"
#   fuzz    each fuzz target for FUZZ_RUNS (10 million)
#   next    the "next" pass alone
#
# Each pass exports OIP_PASS (plain, next, asan, valgrind): a test that is
# heavy or measures time runs in the plain pass only (oiptest.plain_only;
# docs/testing.md, "Passes").

set -euo pipefail

# build.sh's installers and builders, without its commands
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build.sh"

# the module with ASan and UBSan, to load into the stock nginx
do_build_asan() {
    phase "building the module with ASan and UBSan"
    build_module nginx-asan \
        "-fsanitize=address,undefined -fno-omit-frame-pointer \
         -fno-sanitize-recover=undefined" \
        "-fsanitize=address,undefined"
    mkdir -p "$BUILD/asan"
    mv -f "$BUILD/nginx-asan.so" "$BUILD/asan/ngx_http_oip_module.so"
}

# a locale whose radix character is a comma, for the reentrancy test:
# made here (localedef, from Debian's locales data), not in the system's
LOCALE_DIR="$BUILD/locale"

make_locale() {
    [ -f "$LOCALE_DIR/de_DE.UTF-8/LC_NUMERIC" ] && return 0
    mkdir -p "$LOCALE_DIR"
    # it exits 1 on mere warnings: what it wrote is what counts
    localedef -i de_DE -f UTF-8 "$LOCALE_DIR/de_DE.UTF-8" || true
    [ -f "$LOCALE_DIR/de_DE.UTF-8/LC_NUMERIC" ] \
        || { say "localedef could not make de_DE.UTF-8"; exit 1; }
}

do_unit() {
    phase "unit tests (codec, ASan+UBSan; reentrancy, TSan) and the build's \
shape"
    "${MAKE_T[@]}" unit tsan
    make_locale
    LOCPATH="$LOCALE_DIR" prove -e '' "$BUILD"/unit/test_* \
        "$BUILD"/tsan/test_* "$ROOT/t/unit/test_layout.sh"
}

# the passes: what a test sees of it in OIP_PASS
with_asan() {
    local asan ubsan
    asan=$(gcc -print-file-name=libasan.so)
    ubsan=$(gcc -print-file-name=libubsan.so)
    OIP_PASS=asan \
    OIP_MODULE="$BUILD/asan/ngx_http_oip_module.so" \
    OIP_NGINX_ENV="{\"LD_PRELOAD\": \"$asan:$ubsan\",
                    \"ASAN_OPTIONS\": \"detect_leaks=0\",
                    \"UBSAN_OPTIONS\": \"print_stacktrace=1\"}" \
        "$@"
}

with_valgrind() {
    OIP_PASS=valgrind \
    OIP_NGINX_SINGLE=1 \
    OIP_NGINX_WRAP="[\"valgrind\", \"--quiet\", \"--leak-check=full\",
                     \"--show-leak-kinds=definite\",
                     \"--errors-for-leak-kinds=definite\",
                     \"--suppressions=$ROOT/t/valgrind.supp\",
                     \"--log-file=%DIR%/valgrind.%p.log\"]" \
        "$@"
}

FUZZ_TARGETS=(request response roundtrip grpc)

# fuzz_run TARGET ARGS...: one target on a scratch copy of its seeds and
# of every input that ever found a bug (t/fuzz/regress/): they run first
fuzz_run() {
    local t=$1 dir="$BUILD/fuzz/work-$1"
    shift
    rm -rf "$dir"
    mkdir -p "$dir/corpus"
    cp "$ROOT/t/fuzz/corpus/$t/"* "$dir/corpus/"
    if [ -d "$ROOT/t/fuzz/regress/$t" ]; then
        cp "$ROOT/t/fuzz/regress/$t/"* "$dir/corpus/"
    fi
    (cd "$dir" && "$BUILD/fuzz/fuzz_$t" -dict="$ROOT/t/fuzz/oip.dict" \
        -workers=1 -jobs=1 -print_final_stats=1 "$@" corpus \
        > "$dir/fuzz.log" 2>&1) || {
        tail -60 "$dir/fuzz.log" >&2
        say "fuzz_$t failed: $dir/fuzz.log, crash files in $dir"
        return 1
    }
    printf 'fuzz_%s: %s executions, %s/s\n' "$t" \
        "$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' \
           "$dir/fuzz.log" | grep -Eo '[0-9]+$')" \
        "$(grep -Eo 'stat::average_exec_per_sec: *[0-9]+' \
           "$dir/fuzz.log" | grep -Eo '[0-9]+$')" >&2
}

# do_fuzz ARG: every target, with -max_total_time or -runs
do_fuzz() {
    local t
    "${MAKE_T[@]}" fuzz
    for t in "${FUZZ_TARGETS[@]}"; do
        fuzz_run "$t" "$1"
    done
}

# the test files of a suite, or those named on the command line
INTEGRATION=("$ROOT"/t/integration/test_*.py)
LOAD=("$ROOT"/t/load/test_load.py)

select_files() {
    local t
    [ $# -gt 0 ] || return 0
    INTEGRATION=()
    LOAD=()
    for t in "$@"; do
        t=$(realpath "$t")
        case "$t" in
            */load/*) LOAD+=("$t") ;;
            *) INTEGRATION+=("$t") ;;
        esac
    done
}

do_check() {
    select_files "$@"
    do_build
    install_pkgs "${PKGS_TEST[@]}"
    do_unit
    [ ${#INTEGRATION[@]} -eq 0 ] \
        || run_py "integration tests: real nginx" "${INTEGRATION[@]}"
}

do_test() {
    local all fuzz rc

    do_check "$@"
    all=("${INTEGRATION[@]}" "${LOAD[@]}")

    build_next
    build_no_threads

    # The fuzzers, one core's work, then the ASan build, beside the next
    # pass, whose tests mostly wait on sockets (and measure no time:
    # plain_only): their report follows it.  Both are waited for,
    # whatever fails.
    phase "fuzzing, ${FUZZ_SECONDS:-20} s a target (libFuzzer, ASan+UBSan), \
then the ASan build, beside the next pass"
    mkdir -p "$BUILD/logs"
    {
        do_fuzz -max_total_time="${FUZZ_SECONDS:-20}"
        do_build_asan
    } > "$BUILD/logs/fuzz.log" 2>&1 &
    fuzz=$!
    rc=0
    if [ ${#INTEGRATION[@]} -ne 0 ]; then
        OIP_PASS=next OIP_NGINX="$NEXT_NGINX" OIP_MODULE="$NEXT_MODULE" \
            run_py "integration tests: nginx $NEXT_VERSION" \
            "${INTEGRATION[@]}" || rc=1
    fi
    phase "the fuzzers' report, the ASan build's"
    wait "$fuzz" || rc=1
    cat "$BUILD/logs/fuzz.log" >&2
    [ $rc -eq 0 ] || exit 1

    [ ${#LOAD[@]} -eq 0 ] || run_py "load test: real nginx" "${LOAD[@]}"

    with_asan run_py "the module with ASan+UBSan in stock nginx" "${all[@]}"
    with_valgrind run_py "nginx under valgrind memcheck" "${all[@]}"
    phase "all tests passed"
}

# The second nginx: the newest release whose source Debian's archive
# serves in full here is 1.26.3 (Debian 13, trixie; sid's 1.30.6 comes as
# binary packages only).  Its upstream tarball, checked against trixie's
# Sources index, is built with the flags of trixie's own nginx (its
# nginx -V), without the =dynamic modules (geoip, image_filter, perl,
# xslt, mail, stream: separate .so files, nothing the binary or this
# module depends on), and with this module added; the binary runs from
# its build tree.  Fetched and configured again only when missing or
# when the module's file lists change: make picks up the rest.
NEXT_SUITE=trixie
NEXT_VERSION=1.26.3
NEXT_FLAGS=(--prefix=/usr/share/nginx --conf-path=/etc/nginx/nginx.conf
    --http-log-path=/var/log/nginx/access.log --error-log-path=stderr
    --lock-path=/var/lock/nginx.lock --pid-path=/run/nginx.pid
    --modules-path=/usr/lib/nginx/modules
    --http-client-body-temp-path=/var/lib/nginx/body
    --http-fastcgi-temp-path=/var/lib/nginx/fastcgi
    --http-proxy-temp-path=/var/lib/nginx/proxy
    --http-scgi-temp-path=/var/lib/nginx/scgi
    --http-uwsgi-temp-path=/var/lib/nginx/uwsgi
    --with-compat --with-debug --with-pcre-jit --with-http_ssl_module
    --with-http_stub_status_module --with-http_realip_module
    --with-http_auth_request_module --with-http_v2_module
    --with-http_v3_module --with-http_dav_module --with-http_slice_module
    --with-threads --with-http_addition_module --with-http_flv_module
    --with-http_gunzip_module --with-http_gzip_static_module
    --with-http_mp4_module --with-http_random_index_module
    --with-http_secure_link_module --with-http_sub_module
    --with-mail_ssl_module --with-stream_ssl_module
    --with-stream_ssl_preread_module --with-stream_realip_module)
# trixie's compiler flags beyond bookworm's dpkg-buildflags
NEXT_CFLAGS="-Werror=implicit-function-declaration -fstack-clash-protection \
-fcf-protection"

# fetch_next_source DIR: the tarball, by apt from trixie's Sources index
# with a private apt configuration (the system's is not touched)
fetch_next_source() {
    local dir=$1 apt="$1/apt" uri name sum
    mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
    cat > "$apt/sources.list" <<EOT
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] \
http://deb.debian.org/debian $NEXT_SUITE main
EOT
    cat > "$apt/apt.conf" <<EOT
Dir::Etc::sourcelist "$apt/sources.list";
Dir::Etc::sourceparts "-";
Dir::State::Lists "$apt/lists";
Dir::Cache "$apt/cache";
APT::Sandbox::User "root";
EOT
    APT_CONFIG="$apt/apt.conf" apt-get update -qq >/dev/null
    # 'URI' NAME SIZE SHA256:SUM, for the upstream tarball only: the
    # mirror here serves no .dsc nor Debian tarball for trixie's nginx
    read -r uri name _ sum < <(APT_CONFIG="$apt/apt.conf" \
        apt-get source -qq --print-uris "nginx/$NEXT_SUITE" \
        | grep "nginx_$NEXT_VERSION.orig.tar.gz")
    [ -n "$name" ] || { say "no nginx $NEXT_VERSION in $NEXT_SUITE"; exit 1; }
    uri=${uri//\'/}
    curl -fsSL -o "$dir/$name" "$uri"
    echo "${sum#SHA256:}  $dir/$name" | sha256sum -c --quiet \
        || { say "checksum of $name"; exit 1; }
    tar -xzf "$dir/$name" -C "$dir"
}

build_next() {
    local dir="$BUILD/nginx-next" src sum
    src="$dir/nginx-$NEXT_VERSION"
    sum=$(cat "$ROOT/config" "$ROOT/ngx_oip_module/codec/sources" \
          | md5sum | cut -d' ' -f1)
    install_pkgs "${PKGS_BUILD[@]}" "${PKGS_NEXT[@]}"
    # configured again when the module's file lists change
    if [ ! -f "$src/objs/Makefile" ] \
            || [ "$(cat "$dir/.configured" 2>/dev/null)" != "$sum" ]; then
        phase "nginx $NEXT_VERSION: the source from Debian $NEXT_SUITE, \
configured as Debian configures it"
        rm -rf "$dir"
        mkdir -p "$dir"
        fetch_next_source "$dir"
        (cd "$src" && ./configure \
            --with-cc-opt="$(dpkg-buildflags --get CFLAGS) $NEXT_CFLAGS \
-fPIC $(dpkg-buildflags --get CPPFLAGS)" \
            --with-ld-opt="$(dpkg-buildflags --get LDFLAGS) -Wl,-z,now -fPIC" \
            "${NEXT_FLAGS[@]}" --add-dynamic-module="$ROOT") \
            > "$dir/configure.log" 2>&1 \
            || { tail -20 "$dir/configure.log" >&2; exit 1; }
        echo "$sum" > "$dir/.configured"
    fi
    phase "nginx $NEXT_VERSION and the module built into it"
    make -s -j2 -C "$src" > "$dir/make.log" 2>&1 \
        || { cat "$dir/make.log" >&2; exit 1; }
    NEXT_NGINX="$src/objs/nginx"
    NEXT_MODULE="$src/objs/ngx_http_oip_module.so"
}

# The module against nginx 1.26.3 configured without --with-threads: it
# must build (the thread pool is #if (NGX_THREADS)); compiled only.
# nginx's configure writes the source tree's top Makefile: kept aside.
build_no_threads() {
    local src="$BUILD/nginx-next/nginx-$NEXT_VERSION"
    local dir="$BUILD/nginx-next/no-threads"
    phase "the module against nginx $NEXT_VERSION without threads (compiled)"
    cp "$src/Makefile" "$src/Makefile.next"
    (cd "$src" && ./configure --with-compat --with-http_v2_module \
        --add-dynamic-module="$ROOT" --builddir="$dir" \
        && make -f "$dir/Makefile" modules) > "$dir.log" 2>&1 \
        || { mv -f "$src/Makefile.next" "$src/Makefile"
             tail -20 "$dir.log" >&2; exit 1; }
    mv -f "$src/Makefile.next" "$src/Makefile"
    ! grep -q "define NGX_THREADS" "$dir/ngx_auto_config.h" \
        || { say "$dir: built with threads"; exit 1; }
}

do_next() {
    select_files "$@"
    install_pkgs "${PKGS_TEST[@]}"
    build_next
    build_no_threads
    OIP_PASS=next OIP_NGINX="$NEXT_NGINX" OIP_MODULE="$NEXT_MODULE" \
        run_py "integration tests: nginx $NEXT_VERSION" "${INTEGRATION[@]}"
}


cmd=${1:-}
[ $# -gt 0 ] && shift

case "$cmd" in
    check) export OIP_QUICK=1
           do_check "$@"; phase "check passed" ;;
    test) do_test "$@" ;;
    fuzz) install_pkgs "${PKGS_BUILD[@]}" "${PKGS_TEST[@]}"
          phase "fuzzing, ${FUZZ_RUNS:-10000000} executions a target"
          do_fuzz -runs="${FUZZ_RUNS:-10000000}" ;;
    next) do_next "$@"; phase "nginx $NEXT_VERSION: passed" ;;
    *) sed -n '5,25p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
