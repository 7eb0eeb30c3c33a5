#!/bin/sh
#
# Copyright (C) ngx_oip_module authors
#
# The shape of the build, as docs/design.md draws it, read off the objects
# nginx's build made (build/nginx) and the module it linked:
#
#   - the codec is nginx-free: its objects call no ngx_ function;
#   - the codec is reentrant: no object of it has writable data (.data,
#     .bss and their kin; .data.rel.ro is written once, by the loader),
#     so nothing in it is shared by the threads of oip_thread_pool;
#   - the glue is a tree: the request path and the response path use the
#     module file and the codec, never each other; the signature file
#     (the model-aware edge) is the request path's, the response path
#     never uses it, and it uses nothing of either path; the signatures'
#     zone (ngx_http_oip_sig_cache.c) uses nothing of the fetch or of
#     either path; the cache file
#     ($oip_digest, a refused answer out of the cache), the thread file
#     (big conversions in a thread pool) and the gRPC file (the gRPC
#     transport) serve both paths and use nothing of either;
#   - the module links exactly the libraries config gives it.
#
# And the docs that describe these files, read against the files:
#
#   - docs/design.md's file map (the first fenced block under "## The
#     split"; a line indented four spaces names a file of the folder
#     above it, "name.c/.h" names two) names every file of codec/ and
#     nginx/, once, and no file that is not there;
#   - codec/sources lists every .c and .h of codec/, and config builds
#     every .c and .h of nginx/;
#   - docs/design.md's rows of who uses whom (the second fenced block
#     there) hold every .c and .h of both folders and no other name, and
#     each file's #include "..." lines name only its own header and
#     headers of rows below its own;
#   - docs/testing.md's table of fuzz targets lists the fuzz_*.c of
#     t/fuzz/, which are t/run.sh's FUZZ_TARGETS, with the number of
#     files in each one's corpus/ and regress/;
#   - docs/testing.md names every integration test file, and every test
#     file it names exists.
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

echo "1..31"

if [ ! -d "$OBJ/codec" ] || [ ! -f "$SO" ]; then
    echo "Bail out! the module is not built: ./build.sh build"
    exit 1
fi

calls=$(for o in "$OBJ"/codec/*.o; do used "$o"; done | grep '^ngx_')
[ -z "$calls" ]
ok $? "the codec calls nothing of nginx${calls:+: }$(echo $calls)"

# sections of writable data with a size: "object section size"
data=$(for o in "$OBJ"/codec/*.o; do
           objdump -h "$o" | awk -v f="$(basename "$o")" '
               $2 ~ /^\.(data|bss|tdata|tbss)/ && $2 !~ /^\.data\.rel\.ro/ \
                   && $3 !~ /^0+$/ { print f ":" $2 "(0x" $3 ")" }'
       done)
[ -z "$data" ]
ok $? "the codec has no writable data${data:+: }$(echo $data)"

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

# the signatures' zone knows nothing of the fetch, nor of the paths
zone="$GLUE/ngx_http_oip_sig_cache.o"
used "$zone" > "$tmp/zone.use"
both=$(cat "$tmp/req.def" "$tmp/resp.def" "$tmp/sig.def" | sort -u \
       | comm -12 "$tmp/zone.use" -)
[ -z "$both" ]
ok $? "the signatures' zone uses nothing of the fetch or of either path${both:+: }$(echo $both)"

# a glue file that serves the paths and uses nothing of either: its
# symbols kept in $tmp/NAME.def and .use for the checks below
apart() {
    local name=$1 what=$2 both
    defined "$GLUE/ngx_http_oip_$name.o" > "$tmp/$name.def"
    used "$GLUE/ngx_http_oip_$name.o" > "$tmp/$name.use"
    both=$(cat "$tmp/req.def" "$tmp/resp.def" | sort -u \
           | comm -12 "$tmp/$name.use" -)
    [ -z "$both" ]
    ok $? "$what uses nothing of either path${both:+: }$(echo $both)"
}

apart cache "the cache file"
apart thread "the thread file"

# the transports: tables the module picks, which the paths reach only
# through the location's table
apart http "the http transport"
apart grpc "the grpc transport"

sort -u "$tmp/http.def" "$tmp/grpc.def" > "$tmp/tr.def"
named=$(cat "$tmp/req.use" "$tmp/resp.use" | sort -u \
        | comm -12 "$tmp/tr.def" -)
[ -z "$named" ]
ok $? "the paths call no transport by name, only the location's table${named:+: }$(echo $named)"

# the body file serves the request path; the spool file both (bodies
# and answers above oip_buffer, through files)
apart body "the body file"
apart spool "the spool file"

# admission serves both paths; its zone knows nothing of them
apart admission "the admission file"
apart admission_zone "the admission zone"

# the balancer serves the upstream; the response path says its 503
apart sequence "the sequence balancer"

# streams: filters of their own, under the response path's, which asks
# them whether an answer is a stream's
apart stream "the stream file"

# answers above oip_buffer: the response path hands them to the flow
# file, which sends them through its saved next filters
apart flow "the flow file"

# generate: routed by the transports, its request and answer made by
# the paths' calls
apart generate "the generate file"

# what the glue files use of each other: the module and util files', the
# cache, thread, admission, sequence, stream, flow, spool and generate
# files' helpers, and for the request path the signature and body files'
defined "$GLUE/ngx_http_oip_module.o" > "$tmp/mod.def"
defined "$GLUE/ngx_http_oip_util.o" >> "$tmp/mod.def"
cat "$tmp/mod.def" "$tmp/cache.def" "$tmp/thread.def" "$tmp/admission.def" \
    "$tmp/sequence.def" "$tmp/stream.def" "$tmp/flow.def" \
    "$tmp/spool.def" "$tmp/generate.def" \
    | sort -u > "$tmp/modcache.def"
cat "$tmp/modcache.def" "$tmp/sig.def" "$tmp/body.def" \
    | sort -u \
    > "$tmp/modsig.def"
grep '^ngx_http_oip_' "$tmp/req.use" | sort -u > "$tmp/req.glue"
grep '^ngx_http_oip_' "$tmp/resp.use" | sort -u > "$tmp/resp.glue"
stray="$(comm -23 "$tmp/req.glue" "$tmp/modsig.def")$(comm -23 "$tmp/resp.glue" "$tmp/modcache.def")"
[ -z "$stray" ]
ok $? "the paths use only the module, util, cache, thread, admission, sequence, stream, flow, spool and generate files' helpers (and the request path the signature and body files')${stray:+: }$(echo $stray)"

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

# ---------------------------------------------------------------------
# The docs against the files

CODEC="$ROOT/ngx_oip_module/codec"
NGINX="$ROOT/ngx_oip_module/nginx"
DESIGN="$ROOT/docs/design.md"
TESTING="$ROOT/docs/testing.md"

# the files of both folders, as codec/NAME and nginx/NAME
(cd "$ROOT/ngx_oip_module" && for f in codec/* nginx/*; do
    [ -f "$f" ] && echo "$f"
done) | sort > "$tmp/files"

# fenced block number $1 under "## The split" of docs/design.md
split_block() {
    awk -v want="$1" '
        /^## / { in_split = ($0 == "## The split") }
        in_split && /^```/ { if (inside) { inside = 0; next }
                             n++; inside = 1; next }
        in_split && inside && n == want { print }
    ' "$DESIGN"
}

# the file map: "    name" under "  folder/"; name.c/.h is two files
split_block 1 | awk '
    /^  [^ ]+\// { dir = $1; sub(/\/$/, "", dir); next }
    /^    [^ ]/ {
        name = $1
        if (name ~ /\.c\/\.h$/) {
            sub(/\.c\/\.h$/, "", name)
            print dir "/" name ".c"; print dir "/" name ".h"
        } else {
            print dir "/" name
        }
    }' > "$tmp/map.all"
sort -u "$tmp/map.all" > "$tmp/map"

missing=$(comm -23 "$tmp/files" "$tmp/map")
[ -s "$tmp/map" ] && [ -z "$missing" ]
ok $? "docs/design.md's file map names every file of codec/ and nginx/${missing:+; not in it: }$(echo $missing)"

absent=$(comm -13 "$tmp/files" "$tmp/map")
[ -s "$tmp/map" ] && [ -z "$absent" ]
ok $? "every name in docs/design.md's file map is a file${absent:+; no such file: }$(echo $absent)"

twice=$(sort "$tmp/map.all" | uniq -d)
[ -z "$twice" ]
ok $? "docs/design.md's file map names each file once${twice:+; named twice: }$(echo $twice)"

# codec/sources: its .c and .h lists against the folder
(. "$CODEC/sources"; for f in $oip_codec_srcs $oip_codec_deps; do
    echo "codec/$f"
done) | sort > "$tmp/sources"
grep '^codec/.*\.[ch]$' "$tmp/files" > "$tmp/codec.ch"
unlisted=$(comm -23 "$tmp/codec.ch" "$tmp/sources")
gone=$(comm -13 "$tmp/codec.ch" "$tmp/sources")
[ -s "$tmp/sources" ] && [ -z "$unlisted$gone" ]
ok $? "codec/sources lists exactly the .c and .h of codec/${unlisted:+; not listed: }$(echo $unlisted)${gone:+; listed, no such file: }$(echo $gone)"

# config, run with an empty auto/module: its glue sources and headers
mkdir -p "$tmp/cfg/auto"
: > "$tmp/cfg/auto/module"
(cd "$tmp/cfg" && ngx_addon_dir="$ROOT" && . "$ROOT/config" \
    && for f in $ngx_module_srcs $ngx_module_deps; do echo "$f"; done) \
    | sed -n "s|^$NGINX/|nginx/|p" | sort > "$tmp/config"
grep '^nginx/.*\.[ch]$' "$tmp/files" > "$tmp/nginx.ch"
unlisted=$(comm -23 "$tmp/nginx.ch" "$tmp/config")
gone=$(comm -13 "$tmp/nginx.ch" "$tmp/config")
[ -s "$tmp/config" ] && [ -z "$unlisted$gone" ]
ok $? "config builds exactly the .c and .h of nginx/${unlisted:+; not in config: }$(echo $unlisted)${gone:+; in config, no such file: }$(echo $gone)"

# who uses whom: each name in the rows and its row, counted from the
# top (a name is a file's without .c, .h or .c/.h: a .c and its header
# are one)
split_block 2 | awk '
    { found = 0
      for (i = 1; i <= NF; i++) {
          w = $i
          sub(/,$/, "", w)
          if (w !~ /^(oip|ngx_http_oip)_[a-z0-9_]+(\.c\/\.h|\.c|\.h)?$/)
              continue
          sub(/\..*$/, "", w)
          if (!found) { row++; found = 1 }
          print w, row
      } }' > "$tmp/rows"

bad=$(cd "$ROOT/ngx_oip_module" && for f in codec/*.[ch] nginx/*.[ch]; do
    unit=$(basename "$f"); unit=${unit%.*}
    sed -n 's/^[ \t]*#[ \t]*include[ \t]*"\([^"]*\)".*/\1/p' "$f" \
    | awk -v f="$f" -v unit="$unit" '
        FNR == NR { row[$1] = $2; next }
        FNR == 1 && !(unit in row) { print f ":not-in-the-rows" }
        { h = $0; sub(/\.h$/, "", h)
          if (h == unit) next
          if (!(h in row)) print f ":" $0 "(not-in-the-rows)"
          else if (unit in row && row[h] <= row[unit]) print f ":" $0 }
        END { if (FNR == 0 && !(unit in row)) print f ":not-in-the-rows" }
    ' "$tmp/rows" -
done)
ghosts=$(cd "$ROOT/ngx_oip_module" && while read -r unit row; do
    found=
    for f in codec/"$unit".c codec/"$unit".h nginx/"$unit".c \
             nginx/"$unit".h; do
        [ -f "$f" ] && found=1
    done
    [ -n "$found" ] || echo "$unit"
done < "$tmp/rows")
bad="$bad${ghosts:+ }$(for g in $ghosts; do echo "$g:no-such-file"; done)"
[ -s "$tmp/rows" ] && [ -z "$bad" ]
ok $? "docs/design.md's rows of who uses whom hold every file and no other, and each file includes only headers below its row${bad:+; wrong: }$(echo $bad)"

# the fuzz targets: t/fuzz/fuzz_*.c, t/run.sh's FUZZ_TARGETS and the
# table in docs/testing.md ("| `fuzz_NAME` | seeds | regress |")
for f in "$ROOT"/t/fuzz/fuzz_*.c; do
    t=$(basename "$f" .c); t=${t#fuzz_}
    n=$(ls "$ROOT/t/fuzz/corpus/$t" 2>/dev/null | wc -l)
    r=$(ls "$ROOT/t/fuzz/regress/$t" 2>/dev/null | wc -l)
    echo "fuzz_$t $n $r"
done | sort > "$tmp/fuzz.files"
sed -n 's/^FUZZ_TARGETS=(\(.*\))/\1/p' "$ROOT/t/run.sh" | tr ' ' '\n' \
    | sed '/^$/d; s/^/fuzz_/' | sort > "$tmp/fuzz.run"
sed -n 's/^| `\(fuzz_[a-z0-9_]*\)` | *\([0-9][0-9]*\) *| *\([0-9][0-9]*\) *|.*/\1 \2 \3/p' \
    "$TESTING" | sort > "$tmp/fuzz.doc"
wrong=$(cut -d' ' -f1 "$tmp/fuzz.files" | comm -3 - "$tmp/fuzz.run" \
        | tr -d '\t')
stale=$(comm -3 "$tmp/fuzz.files" "$tmp/fuzz.doc" | tr -d '\t' \
        | cut -d' ' -f1 | sort -u)
[ -s "$tmp/fuzz.doc" ] && [ -z "$wrong$stale" ]
ok $? "the fuzz targets: t/fuzz/fuzz_*.c, t/run.sh's FUZZ_TARGETS and docs/testing.md's table agree, seeds and regression inputs counted (t/fuzz: $(awk '{ printf "%s%s %s/%s", sep, $1, $2, $3; sep = ", " }' "$tmp/fuzz.files"))${wrong:+; not both in t/fuzz and FUZZ_TARGETS: }$(echo $wrong)${stale:+; wrong in docs/testing.md: }$(echo $stale)"

# the integration tests named in docs/testing.md, and the test files it
# names found under t/
unnamed=$(for f in "$ROOT"/t/integration/test_*.py; do
    b=$(basename "$f")
    grep -q "\`$b\`" "$TESTING" || echo "$b"
done)
nofile=$(grep -o '`[a-z_/]*test_[a-z0-9_]*\.\(py\|sh\|c\)`' "$TESTING" \
         | tr -d '`' | sort -u | while read -r f; do
    b=$(basename "$f")
    [ -n "$(find "$ROOT/t" -name "$b" -print -quit)" ] || echo "$f"
done)
[ -z "$unnamed$nofile" ]
ok $? "docs/testing.md names every integration test file, and names no test file that is not there${unnamed:+; not named: }$(echo $unnamed)${nofile:+; no such file: }$(echo $nofile)"

# rooms a reviewer reads whole (issue 26): no glue file over 1,100 lines,
# no hand-written codec .c over 1,500
over=$(wc -l "$ROOT"/ngx_oip_module/nginx/*.c | awk '$2 != "total" && $1 > 1100 { print $2 ":" $1 }'
       wc -l "$ROOT"/ngx_oip_module/codec/*.c | awk '$2 != "total" && $1 > 1500 { print $2 ":" $1 }')
[ -z "$over" ]
ok $? "no glue file over 1,100 lines, no codec .c over 1,500${over:+: }$(echo $over | sed "s|$ROOT/ngx_oip_module/||g")"

exit $failed
