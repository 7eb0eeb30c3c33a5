#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
"""Takes the golden ModelInferRequests (t/unit/golden/grpc/) from the
real module, before a change to the gRPC transport: runs the integration
tests that translate REST to gRPC with OIP_GOLDEN_DIR set (the harness
numbers each POST and writes it; the gRPC runtime writes the
ModelInferRequest each one made, as its bytes came), then keeps every
infer request that reached the runtime as a case:

    NAME.rest   the location's options, the headers the codec reads,
                the path, a blank line, the body
    NAME.pb     the ModelInferRequest the module sent (no frame prefix)

and, when the client got a 200 from it, the way back:

    NAME.answer the ModelInferResponse the runtime sent (no prefix)
    NAME.client what the client got: its status and the headers that
                say the body's form, a blank line, the body

t/unit/test_golden.c holds the codec to them: the protobuf a runtime gets
and what each client gets of an answer are provably the same after the
change.  Run by hand, from the repository
root, with the module built:

    /usr/bin/python3 t/unit/golden/take.py
"""

import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..",
                                    ".."))
OUT = os.path.join(ROOT, "t", "unit", "golden", "grpc")
TESTS = ["t/integration/test_grpc.py", "t/integration/test_carriers.py"]

# the gRPC locations of those tests, as option lines (test_golden.c's):
# oip_grpc_contents typed, oip_raw_input, oip_grpc_max_message
LOCATIONS = {
    "/typed/": ["typed"],
    "/raw/": ["raw INPUT0 FP32 -1"],
    "/small/": ["max_message 1024"],
    "/big/": ["max_message 67108864"],
    "/quick/": [], "/sig/": [], "/grpc/": [], "/v2/": [],
}

# the headers oip_request_framing() reads
FRAMING = ("inference-header-content-length", "content-encoding",
           "content-type")


# the headers that say an answer's form, as the client got them
FORM = ("content-type", "inference-header-content-length")


def answer(base):
    """(the runtime's ModelInferResponse, what the client got as a
    .client file), or None when the client did not get a 200 from it."""
    if not (os.path.exists(base + ".answer.pb")
            and os.path.exists(base + ".client")):
        return None
    with open(base + ".client") as f:
        got = json.load(f)
    if got["status"] != 200:
        return None
    with open(base + ".answer.pb", "rb") as f:
        sent = f.read()
    lines = ["status %d" % got["status"]] + [
        "header %s: %s" % (k, got["headers"][k]) for k in FORM
        if k in got["headers"]]
    return sent, ("\n".join(lines) + "\n\n").encode() + bytes.fromhex(
        got["body"])


def main():
    tmp = tempfile.mkdtemp(prefix="oip-golden-")
    env = dict(os.environ, OIP_GOLDEN_DIR=tmp)
    for t in TESTS:
        r = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, t)],
                           env=env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("%s failed:\n%s" % (t, r.stderr[-3000:]))

    cases, seen = [], set()
    for rest in sorted(glob.glob(os.path.join(tmp, "*.rest"))):
        pb = rest[:-5] + ".pb"
        if not os.path.exists(pb):
            continue                    # refused before the runtime
        with open(rest) as f:
            doc = json.load(f)
        path = doc["path"]
        loc = next(p for p in LOCATIONS if path.startswith(p))
        lines = ["path " + path.split("?")[0]] + LOCATIONS[loc]
        for k, v in doc["headers"].items():
            if k.lower() in FRAMING:
                lines.append("header %s: %s" % (k.lower(), v))
        body = bytes.fromhex(doc["body"])
        with open(pb, "rb") as f:
            want = f.read()
        back = answer(rest[:-5])
        key = hashlib.sha256("\n".join(lines).encode() + b"\0" + body
                             + b"\0" + want + b"\0"
                             + repr(back).encode()).digest()
        if key in seen:
            continue
        seen.add(key)
        cases.append((doc["test"], lines, body, want, back))

    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    count = {}
    answers = 0
    for test, lines, body, want, back in cases:
        count[test] = count.get(test, 0) + 1
        name = "%s-%d" % (test[len("test_"):], count[test])
        with open(os.path.join(OUT, name + ".rest"), "wb") as f:
            f.write(("\n".join(lines) + "\n\n").encode() + body)
        with open(os.path.join(OUT, name + ".pb"), "wb") as f:
            f.write(want)
        if back:
            answers += 1
            with open(os.path.join(OUT, name + ".answer"), "wb") as f:
                f.write(back[0])
            with open(os.path.join(OUT, name + ".client"), "wb") as f:
                f.write(back[1])
    shutil.rmtree(tmp, ignore_errors=True)
    print("%d cases in %s, %d with their answers"
          % (len(cases), os.path.relpath(OUT, ROOT), answers))


if __name__ == "__main__":
    main()
