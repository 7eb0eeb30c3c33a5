#!/usr/bin/env bash
#
# ngx_oip_module: install what is missing, build, run, test.
#
#   ./build.sh build      the module, against Debian's nginx:
#                         build/ngx_http_oip_module.so
#   ./build.sh run        the gateway with the example runtime on
#                         127.0.0.1:8000 (Ctrl-C stops both)
#   ./build.sh test       the whole test suite; non-zero on any failure
#
# Runs as root on Debian 12; installs Debian packages only if missing.

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD="$ROOT/build"
NGX_SRC=/usr/share/nginx/src
PY=/usr/bin/python3

# what building and testing need, as Debian packages
PKGS_BUILD=(nginx nginx-dev libcjson-dev libssl-dev gcc make libc6-dev
            zlib1g-dev libpcre2-dev)
PKGS_TEST=(python3 curl perl)

say() { printf '==> %s\n' "$*" >&2; }

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

do_build() {
    install_pkgs "${PKGS_BUILD[@]}"
    stop_system_nginx

    local stamp="$BUILD/nginx/.configured" sum
    sum=$(cat "$ROOT/config" | md5sum | cut -d' ' -f1)

    # configure only when the glue changed: it takes seconds, make does not
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$sum" ]; then
        say "configuring against $(/usr/sbin/nginx -v 2>&1)"
        rm -rf "$BUILD/nginx"
        mkdir -p "$BUILD/nginx"
        (cd "$NGX_SRC" && bash -c '. ./conf_flags; ./configure \
            --with-cc-opt="$(dpkg-buildflags --get CFLAGS) -fPIC $(dpkg-buildflags --get CPPFLAGS)" \
            --with-ld-opt="$(dpkg-buildflags --get LDFLAGS) -fPIC" \
            "${NGX_CONF_FLAGS[@]}" \
            --add-dynamic-module="$0" --builddir="$1"' \
            "$ROOT" "$BUILD/nginx") > "$BUILD/configure.log" 2>&1 || {
            tail -20 "$BUILD/configure.log" >&2
            exit 1
        }
        echo "$sum" > "$stamp"
    fi

    say "building the module"
    make -s -f "$BUILD/nginx/Makefile" -C "$NGX_SRC" modules \
        > "$BUILD/make.log" 2>&1 || { cat "$BUILD/make.log" >&2; exit 1; }
    cp "$BUILD/nginx/ngx_http_oip_module.so" "$BUILD/ngx_http_oip_module.so"
    say "built $BUILD/ngx_http_oip_module.so"
}

usage() {
    sed -n '3,11p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
}

cmd=${1:-}
[ $# -gt 0 ] && shift

case "$cmd" in
    build) do_build ;;
    *) usage ;;
esac
