#!/bin/sh
#
# Copyright (C) ngx_oip_module authors
#
# The shape of the build, as docs/design.md draws it, read off the objects
# nginx's build made (build/nginx) and the module it linked:
#
#   - the codec is nginx-free: its objects call no ngx_ function;
#   - the glue is a tree: the request path and the response path use the
#     module file and the codec, never each other; the signature file
#     (the model-aware edge) is the request path's, the response path
#     never uses it, and it uses nothing of either path; the cache file
#     ($oip_digest, a refused answer out of the cache), the thread file
#     (big conversions in a thread pool) and the gRPC file (the gRPC
#     transport) serve both paths and use nothing of either;
#   - the module links exactly the libraries config gives it.
#
# TAP, for prove.

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OBJ="$ROOT/build/nginx/addon"
SO="$ROOT/build/ngx_http_oip_module.so"
GLUE="$OBJ/nginx"

n=0
failed=0

ok() {
    n=$((n + 1))
    if [ "$1" = 0 ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $2"
        failed=1
    fi
}

# the symbols an object defines, and those it uses from elsewhere
defined() { nm --defined-only -g "$1" | awk '{ print $3 }' | sort -u; }
used() { nm -u "$1" | awk '{ print $2 }' | sort -u; }

echo "1..10"

if [ ! -d "$OBJ/codec" ] || [ ! -f "$SO" ]; then
    echo "Bail out! the module is not built: ./build.sh build"
    exit 1
fi

calls=$(for o in "$OBJ"/codec/*.o; do used "$o"; done | grep '^ngx_')
[ -z "$calls" ]
ok $? "the codec calls nothing of nginx${calls:+: }$(echo $calls)"

req="$GLUE/ngx_http_oip_request.o"
resp="$GLUE/ngx_http_oip_response.o"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

defined "$req" > "$tmp/req.def"
defined "$resp" > "$tmp/resp.def"
used "$req" > "$tmp/req.use"
used "$resp" > "$tmp/resp.use"

both=$(comm -12 "$tmp/req.use" "$tmp/resp.def")
[ -z "$both" ]
ok $? "the request path uses nothing of the response path${both:+: }$(echo $both)"

both=$(comm -12 "$tmp/resp.use" "$tmp/req.def")
[ -z "$both" ]
ok $? "the response path uses nothing of the request path${both:+: }$(echo $both)"

sig="$GLUE/ngx_http_oip_signature.o"
defined "$sig" > "$tmp/sig.def"
used "$sig" > "$tmp/sig.use"

both=$(comm -12 "$tmp/resp.use" "$tmp/sig.def")
[ -z "$both" ]
ok $? "the response path uses nothing of the signature file${both:+: }$(echo $both)"

both=$(cat "$tmp/req.def" "$tmp/resp.def" | sort -u | comm -12 "$tmp/sig.use" -)
[ -z "$both" ]
ok $? "the signature file uses nothing of either path${both:+: }$(echo $both)"

cache="$GLUE/ngx_http_oip_cache.o"
defined "$cache" > "$tmp/cache.def"
used "$cache" > "$tmp/cache.use"

both=$(cat "$tmp/req.def" "$tmp/resp.def" | sort -u | comm -12 "$tmp/cache.use" -)
[ -z "$both" ]
ok $? "the cache file uses nothing of either path${both:+: }$(echo $both)"

thread="$GLUE/ngx_http_oip_thread.o"
defined "$thread" > "$tmp/thread.def"
used "$thread" > "$tmp/thread.use"

both=$(cat "$tmp/req.def" "$tmp/resp.def" | sort -u | comm -12 "$tmp/thread.use" -)
[ -z "$both" ]
ok $? "the thread file uses nothing of either path${both:+: }$(echo $both)"

grpc="$GLUE/ngx_http_oip_grpc.o"
defined "$grpc" > "$tmp/grpc.def"
used "$grpc" > "$tmp/grpc.use"

both=$(cat "$tmp/req.def" "$tmp/resp.def" | sort -u | comm -12 "$tmp/grpc.use" -)
[ -z "$both" ]
ok $? "the gRPC file uses nothing of either path${both:+: }$(echo $both)"

# what the glue files use of each other: the module file's, the cache,
# thread and gRPC files' helpers, and for the request path the signature
# file's
defined "$GLUE/ngx_http_oip_module.o" > "$tmp/mod.def"
cat "$tmp/mod.def" "$tmp/cache.def" "$tmp/thread.def" "$tmp/grpc.def" \
    | sort -u > "$tmp/modcache.def"
cat "$tmp/modcache.def" "$tmp/sig.def" | sort -u > "$tmp/modsig.def"
grep '^ngx_http_oip_' "$tmp/req.use" | sort -u > "$tmp/req.glue"
grep '^ngx_http_oip_' "$tmp/resp.use" | sort -u > "$tmp/resp.glue"
stray="$(comm -23 "$tmp/req.glue" "$tmp/modsig.def")$(comm -23 "$tmp/resp.glue" "$tmp/modcache.def")"
[ -z "$stray" ]
ok $? "the paths use only the module, cache, thread and gRPC files' helpers (and the request path the signature file's)${stray:+: }$(echo $stray)"

# NEEDED entries, but libc: the libraries of config, each -lX a libX.so.N
# (the codec's, and the glue's: -l words of config's ngx_module_libs)
libs="$(. "$ROOT/ngx_oip_module/codec/sources"; echo $oip_codec_libs) \
$(sed -n 's/^ngx_module_libs="\(.*\)"/\1/p' "$ROOT/config" \
  | tr ' ' '\n' | grep '^-l')"
want=$(for l in $libs; do echo "lib${l#-l}.so"; done | sort)
have=$(readelf -d "$SO" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' \
       | grep -v '^libc\.so' | sed 's/\.so\..*/.so/' | sort)
[ "$want" = "$have" ]
ok $? "the module links exactly what config says ($(echo $want)), it links: $(echo $have)"

exit $failed
