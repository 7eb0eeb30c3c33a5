#!/usr/bin/python3
#
# Copyright (C) ngx_oip_module authors
#
# Writes the seed corpora of the codec's libFuzzer targets, each seed laid
# out as its target reads it (a config prefix, then the body):
#
#   corpus/request/    fuzz_request.c     16-byte config + body
#   corpus/response/   fuzz_response.c    16-byte config + names + body
#   corpus/roundtrip/  fuzz_roundtrip.c   4-byte config + elements
#   corpus/grpc/       fuzz_grpc.c        4-byte config + message or body
#
# Deterministic: the same files every run (gzip without a timestamp).
# Standard library only.  Run from anywhere: /usr/bin/python3 make_corpus.py

import gzip
import json
import os
import shutil
import struct
import sys
import zlib


HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, 'corpus')
MAX_SEED = 4096

FORM = {'keep': 0, 'binary': 1, 'json': 2}
ENC = {'none': 0, 'gzip': 1, 'deflate': 2}
DTYPES = ['BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16',
          'INT32', 'INT64', 'FP16', 'BF16', 'FP32', 'FP64', 'BYTES']
# as fuzz_request.c picks the raw input's name: c[8] bits 5-6
RAW_NAMES = [b'INPUT0', b'IN"0', '\u540d\\'.encode(), b'\xff']

# IHCL modes, as fz_ihcl() in fuzz.h reads them
IHCL_NONE, IHCL_ABS, IHCL_TAIL, IHCL_ZERO = 0, 1, 2, 3


def js(obj):
    """Compact JSON, as clients send it; NaN and Infinity as Triton's."""
    return json.dumps(obj, separators=(',', ':'),
                      ensure_ascii=False).encode('utf-8')


def req_config(inputs='keep', outputs='keep', enc='none', depth=100,
               ihcl=IHCL_NONE, ihcl_value=0, small=None, raw=None,
               raw_outputs_json=False, fail_at=None, fail_all=False,
               raw_name=0, dims_text=0, ihcl_text=0, finite=False,
               signature=False, coerce=False, levels=False, priority=0):
    """The 16 bytes fuzz_request.c reads first (see its comment)."""
    c = bytearray(16)
    c[0] = FORM[inputs] | (FORM[outputs] << 2) | (ENC[enc] << 4)
    c[1] = (depth - 1) % 200
    c[2] = ihcl
    struct.pack_into('<I', c, 3, ihcl_value)

    if small is not None:
        c[0] |= 0x40
        c[11] = (small[0] - 16) // 16
        c[12] = small[1] // 8

    if raw is not None:
        # raw: (datatype, dims such as [-1, 4]), dims as nibbles + 1
        dt, dims = raw
        c[0] |= 0x80
        c[7] = DTYPES.index(dt)
        deduced = dims.index(-1) if -1 in dims else 7
        c[8] = (len(dims) - 1) | (deduced << 2)
        nib = 0
        for i, d in enumerate(dims):
            nib |= ((d - 1) & 15 if d > 0 else 0) << (4 * i)
        c[9] = nib & 0xff
        c[10] = (nib >> 8) & 0xff
        c[8] |= raw_name << 5

    # raw dims: the first dims_text bytes of the body; oip_ihcl_parse()
    # is checked on the first ihcl_text bytes
    c[14] = dims_text
    c[15] = ihcl_text

    # oip_admit's levels (2, default 2); oip_priority's value (1 to 3)
    if levels:
        c[14] |= 0x20
    c[14] |= priority << 6

    if raw_outputs_json:
        c[2] |= 0x10

    if finite:
        c[2] |= 0x20

    # the body then starts with 2 bytes of length and a model's metadata
    if signature:
        c[2] |= 0x40

    if coerce:
        c[2] |= 0x80

    if fail_at is not None:
        c[2] |= 0x04 | (0x08 if fail_all else 0)
        c[13] = fail_at - 1

    return bytes(c)


def resp_config(names=(), bits=(), listed=True, binary=False, depth=100,
                ihcl=IHCL_NONE, ihcl_value=0, small=None, fail_at=None):
    """The 16 bytes fuzz_response.c reads first.  It lists the first
    len(names) "name":"..." values of the body: names only documents
    which ones they are."""
    c = bytearray(16)
    c[0] = (1 if listed else 0) | (2 if binary else 0) | (len(names) << 2)
    c[1] = (depth - 1) % 200
    c[2] = ihcl
    struct.pack_into('<I', c, 3, ihcl_value)

    mask = 0
    for i, b in enumerate(bits):
        mask |= (1 if b else 0) << i
    struct.pack_into('<I', c, 7, mask)

    if small is not None:
        c[2] |= 0x10
        c[11] = (small[0] - 16) // 16
        c[12] = small[1] // 8

    if fail_at is not None:
        c[2] |= 0x04
        c[13] = fail_at - 1

    return bytes(c)


def tensor(name, dt, shape, data=None, bds=None, **params):
    t = {'name': name, 'datatype': dt, 'shape': shape}
    if bds is not None:
        params['binary_data_size'] = bds
    if params:
        t['parameters'] = params
    if data is not None:
        t['data'] = data
    return t


def le(fmt, values):
    return b''.join(struct.pack('<' + fmt, v) for v in values)


def bytes_chunk(elements):
    return b''.join(struct.pack('<I', len(e)) + e for e in elements)


def gz(data):
    return gzip.compress(data, mtime=0)


# -------------------------------------------------------------------------

def request_seeds():
    s = {}

    j = js({'id': '1', 'inputs': [tensor('INPUT0', 'INT32', [2, 2],
                                         [1, -2, 3, 2147483647])]})
    s['json_int32_keep'] = req_config() + j

    j = js({'inputs': [tensor('a', 'FP32', [3], [1.5, -0.0, 3.4028235e38]),
                       tensor('b', 'INT64', [2],
                              [-9223372036854775808, 9223372036854775807])],
            'outputs': [{'name': 'o0'}, {'name': 'o1', 'parameters':
                                         {'binary_data': False}}]})
    s['json_to_binary_outputs_binary'] = req_config('binary', 'binary') + j

    hdr = js({'inputs': [tensor('f', 'FP32', [2], bds=8),
                         tensor('u', 'UINT8', [3], bds=3)]})
    bin_ = le('f', [1.0, -2.5]) + bytes([0, 127, 255])
    s['binary_ihcl_to_json'] = (req_config('json', ihcl=IHCL_TAIL,
                                           ihcl_value=len(bin_))
                                + hdr + bin_)
    s['binary_ihcl_keep_abs'] = (req_config(ihcl=IHCL_ABS,
                                            ihcl_value=len(hdr))
                                 + hdr + bin_)

    j = js({'inputs': [tensor('n', 'INT16', [2, 3],
                              [[1, 2, 3], [-4, -5, 32767]])]})
    s['nested_int16_to_binary'] = req_config('binary') + j

    j = js({'inputs': [tensor('n3', 'UINT16', [2, 1, 2],
                              [[[1, 2]], [[3, 65535]]])]})
    s['nested3_uint16_binary'] = req_config('binary', depth=6) + j

    j = (b'{"inputs":[{"name":"s","datatype":"BYTES","shape":[5],'
         b'"data":["hello","\\u0000nul","\\ud83d\\ude00 \xc3\xa9","",'
         b'"q\\"\\\\\\/\\b\\f\\n\\r\\t"]}]}')
    s['json_bytes_escapes_to_binary'] = req_config('binary') + j

    chunk = bytes_chunk([b'abc', b'', 'caf\u00e9'.encode(), b'\x00\x1f"'])
    hdr = js({'inputs': [tensor('t', 'BYTES', [4], bds=len(chunk))]})
    s['binary_bytes_to_json'] = (req_config('json', ihcl=IHCL_TAIL,
                                            ihcl_value=len(chunk))
                                 + hdr + chunk)

    j = (b'{"inputs":[{"name":"b","datatype":"BOOL","shape":[3],'
         b'"data":[true,false,true]},'
         b'{"name":"h","datatype":"FP16","shape":[5],'
         b'"data":[NaN,Infinity,-Infinity,-0.0,65504]},'
         b'{"name":"g","datatype":"BF16","shape":[3],'
         b'"data":[1e-40,3.3895314e38,-1.5]}]}')
    s['json_bool_fp16_bf16_specials'] = req_config('binary') + j

    j = (b'{"inputs":[{"name":"d","datatype":"FP64","shape":[4],'
         b'"data":[5e-324,1.7976931348623157e308,0.1,-1e-7]},'
         b'{"name":"u","datatype":"UINT64","shape":[1],'
         b'"data":[18446744073709551615]}]}')
    s['json_fp64_uint64_extremes'] = req_config('binary') + j

    j = js({'parameters': {'binary_data_output': True, 'priority': 1},
            'inputs': [tensor('x', 'INT8', [1], [1])],
            'outputs': [{'name': 'a', 'parameters': {'binary_data': True}},
                        {'parameters': {'k': 1, 'binary_data': True},
                         'name': 'b'},
                        {'name': 'c'}]})
    s['outputs_flags_removed_json'] = req_config(outputs='json') + j

    j = js({'inputs': [tensor('x', 'INT8', [1], [1])],
            'outputs': [{'name': 'a'},
                        {'name': 'b', 'parameters': {}},
                        {'name': '\u0062b', 'parameters': {'x': 'y'}}]})
    s['outputs_flags_set_binary'] = req_config(outputs='binary') + j

    j = (b'{ "inputs" : [ {"data" : [1, 2], "name" : "p", '
         b'"parameters" : {"keep" : 1}, "shape" : [2], '
         b'"datatype" : "UINT8"} ] }  ')
    s['data_before_parameters_ws'] = req_config('binary') + j

    chunk = le('i', [7, -7])
    hdr = js({'inputs': [tensor('m', 'INT32', [2], bds=8, other='v'),
                         tensor('k', 'INT8', [2], [1, 2]),
                         tensor('r', 'FP32', [1],
                                shared_memory_region='reg',
                                shared_memory_byte_size=4)]})
    s['mixed_bds_data_shm'] = (req_config('json', ihcl=IHCL_TAIL,
                                          ihcl_value=len(chunk))
                               + hdr + chunk)

    j = js({'inputs': [tensor('z', 'INT16', [2], [1, -1])]})
    s['gzip_json_to_binary'] = req_config('binary', enc='gzip') + gz(j)
    s['deflate_json_keep'] = (req_config(enc='deflate')
                              + zlib.compress(j, 9))

    hdr = js({'inputs': [tensor('w', 'UINT8', [2], bds=2)]})
    plain = hdr + b'\x04\x05'
    s['gzip_binary_ihcl'] = (req_config('json', enc='gzip', ihcl=IHCL_ABS,
                                        ihcl_value=len(hdr)) + gz(plain))

    s['raw_fp32_deduced'] = (req_config('keep', 'binary', ihcl=IHCL_ZERO,
                                        raw=('FP32', [-1, 2]))
                             + le('f', [1, 2, 3, 4, 5, 6]))
    s['raw_int16_to_json'] = (req_config('json', ihcl=IHCL_ZERO,
                                         raw=('INT16', [2, 2]),
                                         raw_outputs_json=True)
                              + le('h', [1, -2, 3, -4]))
    s['raw_bytes'] = (req_config('json', ihcl=IHCL_ZERO,
                                 raw=('BYTES', [1]))
                      + 'h\u00e9llo'.encode())
    s['raw_undeclared_keep_gzip'] = (req_config(enc='gzip', ihcl=IHCL_ZERO)
                                     + gz(b'\x00\x01\x02\x03'))

    j = js({'inputs': [tensor('big', 'FP64', [8], [0.5] * 8)]})
    s['small_limits_413'] = (req_config('binary', small=(128, 32)) + j)

    j = js({'inputs': [tensor('a', 'INT8', [2], [1, 2]),
                       tensor('b', 'BYTES', [1], ['x'])],
            'outputs': [{'name': 'o'}]})
    s['alloc_failure'] = (req_config('binary', 'binary', fail_at=5) + j)
    s['alloc_failure_all'] = (req_config('binary', 'json', fail_at=9,
                                         fail_all=True) + j)

    j = (b'{"inputs":[{"name":"d","datatype":"INT8","shape":[1],'
         b'"data":[1],"name":"d"}]}')
    s['duplicate_key'] = req_config() + j

    j = js({'inputs': [tensor('a', 'INT8', [1], [1], bds=1)]})
    s['data_and_bds'] = req_config() + j

    hdr = js({'inputs': [tensor('a', 'INT8', [2], bds=2)]})
    s['bds_without_ihcl'] = req_config() + hdr

    j = js({'inputs': [tensor('g', 'FP32', [3000], [0] * 3000)]})
    s['gzip_inflate_grows'] = req_config('binary', enc='gzip') + gz(j)

    s['raw_dims_from_body'] = (req_config(ihcl=IHCL_ZERO,
                                          raw=('INT16', [1]), dims_text=4)
                               + b'-1,2' + le('h', [1, 2]))
    s['raw_name_not_utf8'] = (req_config(ihcl=IHCL_ZERO,
                                         raw=('UINT8', [-1]), raw_name=3)
                              + b'\x01\x02')
    s['ihcl_text_max'] = (req_config(ihcl_text=20)
                          + b'18446744073709551615')
    s['ihcl_text_overflow'] = (req_config(ihcl_text=20)
                               + b'18446744073709551616')
    # ihcl_text 31: the body's first 160 bytes read as a Content-Type
    s['carrier_sagemaker'] = (req_config(ihcl_text=31)
                              + b'application/vnd.sagemaker-triton.binary'
                              b'+json;json-header-size=42')
    s['carrier_vertex_quoted'] = (req_config(ihcl_text=31)
                                  + b'Application/VND.Vertex-AI-Triton.'
                                  b'Binary+JSON ; charset=x; '
                                  b'JSON-Header-Size="0"')
    s['carrier_twice'] = (req_config(ihcl_text=31)
                          + b'application/vnd.vertex-ai-triton.binary+json;'
                          b'json-header-size=1;json-header-size=1')

    # KServe's request model dumped: null for every optional member
    nulls = (b'{"id":null,"parameters":null,"inputs":[{"name":"n",'
             b'"shape":[2],"datatype":"FP32","parameters":null,'
             b'"data":[1.5,2]}],"outputs":[{"name":"o","parameters":null}]}')
    s['kserve_nulls_keep'] = req_config() + nulls
    s['kserve_nulls_binary'] = req_config('binary', 'binary') + nulls
    s['kserve_nulls_json_out'] = req_config('keep', 'json') + nulls

    # the priority that goes upstream, the timeout's place
    s['priority_levels_timeout'] = (
        req_config(levels=True, priority=1)
        + js({'parameters': {'priority': 5, 'timeout': 300000},
              'inputs': [tensor('x', 'FP32', [2], [1, 2])]}))
    s['priority_added_with_flag'] = (
        req_config('keep', 'binary', priority=2)
        + js({'inputs': [tensor('x', 'FP32', [2], [1, 2])]}))
    hdr = js({'parameters': {'timeout': 9000, 'binary_data_output': True},
              'inputs': [tensor('b', 'FP32', [2], bds=8)]})
    s['timeout_binary_flag_removed'] = (
        req_config('json', 'json', ihcl=IHCL_TAIL, ihcl_value=8,
                   levels=True, priority=3)
        + hdr + le('f', [1.0, 2.0]))

    # NaN and Infinity towards a JSON-only runtime
    s['nonfinite_json_refused'] = (req_config(finite=True)
                                   + js({'inputs': [tensor(
                                       'x', 'FP32', [3],
                                       [1.0, float('nan'), 2.0])]}))
    hdr = js({'inputs': [tensor('b', 'FP64', [2], bds=16)]})
    s['nonfinite_binary_refused'] = (req_config('json', ihcl=IHCL_TAIL,
                                                ihcl_value=16, finite=True)
                                     + hdr + le('d', [1.0, float('inf')]))

    # model signatures: metadata (2 bytes of length first), then the body
    def meta(obj):
        m = obj if isinstance(obj, bytes) else js(obj)
        return struct.pack('<H', len(m)) + m

    simple = meta({'name': 'm', 'versions': ['1'], 'platform': 'x',
                   'inputs': [tensor('INPUT0', 'INT32', [-1, 2]),
                              tensor('INPUT1', 'INT32', [-1, 2])],
                   'outputs': [tensor('OUTPUT0', 'INT32', [-1, 2])]})
    two = js({'inputs': [tensor('INPUT0', 'INT32', [1, 2], [1, 2]),
                         tensor('INPUT1', 'INT64', [1, 2], [3, 4])],
              'outputs': [{'name': 'OUTPUT0'}]})
    s['signature_fits'] = req_config(signature=True) + simple + two
    s['signature_coerce_binary'] = (req_config('binary', signature=True,
                                               coerce=True) + simple + two)
    s['signature_misfit_output'] = (req_config(signature=True) + simple
                                    + js({'inputs': [tensor(
                                        'INPUT0', 'INT32', [1, 2], [1, 2])],
                                        'outputs': [{'name': 'X'}]}))
    half = meta({'inputs': [{'name': 'h', 'datatype': 'FP16',
                             'shape': [-1]}], 'outputs': None})
    s['signature_coerce_fp16'] = (req_config(signature=True, coerce=True)
                                  + half + js({'inputs': [tensor(
                                      'h', 'FP32', [3], [1.0, 0.1, 65504])]}))
    s['signature_raw'] = (req_config(ihcl=IHCL_ZERO, signature=True) + half
                          + le('e', [1.0, 2.0]))
    s['signature_bad_metadata'] = (req_config(signature=True)
                                   + meta(b'{"inputs":[{"name":"a",'
                                          b'"shape":[-2]}]}') + two)

    s['depth_limit'] = (req_config('binary', depth=3)
                        + js({'inputs': [tensor('d', 'INT8', [1, 1],
                                                [[1]])]}))

    return s


# -------------------------------------------------------------------------

def resp_seeds():
    s = {}

    chunk = le('h', [1, 2, -1, -32768])
    hdr = js({'model_name': 'm', 'model_version': '1', 'outputs': [
        tensor('a', 'INT16', [2], bds=4), tensor('b', 'INT16', [2], bds=4)]})
    s['listed_a_json_b_binary'] = (resp_config(['a', 'b'], [0, 1],
                                               ihcl=IHCL_TAIL,
                                               ihcl_value=len(chunk))
                                   + hdr + chunk)
    s['unlisted_json'] = (resp_config(listed=False, ihcl=IHCL_TAIL,
                                      ihcl_value=len(chunk))
                          + hdr + chunk)

    j = js({'outputs': [tensor('a', 'INT16', [2], [1, 2]),
                        tensor('b', 'INT16', [2], [-1, -32768])]})
    s['json_to_binary_default'] = (resp_config(['a'], [0], binary=True)
                                   + j)
    s['unlisted_binary'] = resp_config(listed=False, binary=True) + j

    chunk = b'\x01\x00\x00\x00\xff'
    hdr = js({'outputs': [tensor('s', 'BYTES', [1], bds=5)]})
    s['bytes_not_utf8_stays'] = (resp_config(listed=False, ihcl=IHCL_TAIL,
                                             ihcl_value=5) + hdr + chunk)

    chunk = bytes_chunk([b'ok', '\u00e9\u4e2d'.encode(), b'\x00\n'])
    hdr = js({'outputs': [tensor('s', 'BYTES', [3], bds=len(chunk))]})
    s['bytes_utf8_to_json'] = (resp_config(listed=False, ihcl=IHCL_TAIL,
                                           ihcl_value=len(chunk))
                               + hdr + chunk)

    j = js({'outputs': [tensor('z', 'FP32', [0], bds=0)]})
    s['zero_size_no_ihcl'] = resp_config(listed=False) + j

    names = ['o%d' % i for i in range(20)]
    outs = [tensor(n, 'INT8', [1], [i]) for i, n in enumerate(names)]
    j = js({'outputs': outs})
    s['many_listed_table'] = (resp_config(names, [i % 2 for i in range(20)])
                              + j)

    chunk = (le('H', [0x3c00, 0x7e00, 0x8000, 0x0001])
             + le('H', [0x3f80, 0xff80])
             + le('d', [float('nan'), -0.0, 1e-310, 2.5]))
    hdr = js({'outputs': [tensor('h', 'FP16', [4], bds=8),
                          tensor('g', 'BF16', [2], bds=4),
                          tensor('d', 'FP64', [4], bds=32)]})
    s['floats_to_json'] = (resp_config(listed=False, ihcl=IHCL_TAIL,
                                       ihcl_value=len(chunk))
                           + hdr + chunk)

    j = (b'{"outputs":[{"name":"\\u0061","datatype":"UINT8","shape":[2],'
         b'"data":[1,2]},{"name":"b\\/","datatype":"UINT8","shape":[1],'
         b'"data":[3]}]}')
    # listed as written, \u0061 and b\/: not the names unescaped
    s['escaped_names'] = resp_config(['\\u0061', 'b\\/'], [1, 1]) + j

    j = js({'outputs': [tensor('n', 'INT32', [2, 2], [[1, 2], [3, 4]])]})
    s['nested_to_binary'] = resp_config(['n'], [1]) + j

    chunk = bytes([1, 0, 1])
    hdr = js({'id': 'r1', 'parameters': {'sequence_id': 3},
              'outputs': [tensor('b', 'BOOL', [3], bds=3, extra=1)]})
    s['bool_extra_params'] = (resp_config(listed=False, ihcl=IHCL_TAIL,
                                          ihcl_value=3) + hdr + chunk)

    j = js({'outputs': [tensor('m', 'FP32', [1], shared_memory_region='r',
                               shared_memory_byte_size=4),
                        tensor('k', 'UINT32', [1], [4294967295])]})
    s['shared_memory'] = resp_config(listed=False, binary=True) + j

    chunk = le('f', [0.1] * 8)
    hdr = js({'outputs': [tensor('f', 'FP32', [8], bds=32)]})
    s['small_limits'] = (resp_config(listed=False, small=(128, 16),
                                     ihcl=IHCL_TAIL, ihcl_value=32)
                         + hdr + chunk)
    s['alloc_failure'] = (resp_config(['f'], [0], ihcl=IHCL_TAIL,
                                      ihcl_value=32, fail_at=4)
                          + hdr + chunk)

    # IHCL mode 1 is taken mod len + 2: len + 1 is one past the end
    s['ihcl_past_end'] = (resp_config(listed=False, ihcl=IHCL_ABS,
                                      ihcl_value=len(hdr + chunk) + 1)
                          + hdr + chunk)

    # KServe's JSON answer: nulls, and orjson's null for a NaN
    j = (b'{"model_name":"m","model_version":null,"id":"1",'
         b'"parameters":null,"outputs":[{"name":"f","shape":[3],'
         b'"datatype":"FP32","parameters":null,"data":[1.5,null,2]},'
         b'{"name":"g","shape":[1],"datatype":"INT8","parameters":null,'
         b'"data":[3]}]}')
    s['kserve_json_nulls'] = resp_config(listed=False) + j
    s['kserve_json_nulls_binary'] = resp_config(listed=False,
                                                binary=True) + j

    # MLServer answers every output; the client listed only the first
    hdr = js({'outputs': [tensor('a', 'INT16', [2], bds=4),
                          tensor('b', 'INT16', [2], [5, 6]),
                          tensor('c', 'INT16', [2], bds=4)]})
    s['unlisted_dropped'] = (resp_config(['a'], [1], ihcl=IHCL_TAIL,
                                         ihcl_value=8)
                             + hdr + le('h', [1, 2, 3, 4]))

    return s


# -------------------------------------------------------------------------

def rt_config(dt, n, response=False, rank2=False):
    return bytes([DTYPES.index(dt), n,
                  (1 if response else 0) | (2 if rank2 else 0), 0])


def rt_text_config(dt):
    return bytes([1 if dt == 'FP32' else 0, 0, 4, 0])


def rt_bytes_element(raw):
    assert len(raw) < 24
    return bytes([len(raw)]) + raw


def roundtrip_seeds():
    s = {}
    nan32 = struct.unpack('<f', struct.pack('<I', 0x7fc00001))[0]

    s['bool'] = rt_config('BOOL', 5, True) + bytes([1, 0, 1, 1, 0])
    s['uint8'] = rt_config('UINT8', 4) + bytes([0, 1, 127, 255])
    s['uint16'] = rt_config('UINT16', 3, True) + le('H', [0, 256, 65535])
    s['uint32'] = rt_config('UINT32', 2) + le('I', [1, 4294967295])
    s['uint64'] = (rt_config('UINT64', 2, True)
                   + le('Q', [0, 18446744073709551615]))
    s['int8'] = rt_config('INT8', 3) + le('b', [-128, -1, 127])
    s['int16'] = rt_config('INT16', 3, rank2=True) + le('h', [-32768, 0, 9])
    s['int32'] = rt_config('INT32', 2) + le('i', [-2147483648, 2147483647])
    s['int64'] = (rt_config('INT64', 2, True)
                  + le('q', [-9223372036854775808, 9223372036854775807]))
    s['fp16'] = (rt_config('FP16', 8, True)
                 + le('H', [0x0000, 0x8000, 0x0001, 0x03ff, 0x7bff, 0x7c00,
                            0xfe01, 0x3555]))
    s['bf16'] = (rt_config('BF16', 8, True)
                 + le('H', [0x0000, 0x8000, 0x0001, 0x007f, 0x7f7f, 0xff80,
                            0x7fc1, 0x3eaa]))
    s['fp32'] = (rt_config('FP32', 8, True)
                 + le('f', [0.0, -0.0, 1e-45, 1.17549435e-38, 3.4028235e38,
                            float('-inf'), nan32, 0.1]))
    s['fp64'] = (rt_config('FP64', 8, True)
                 + le('d', [0.0, -0.0, 5e-324, 2.2250738585072014e-308,
                            1.7976931348623157e308, float('inf'),
                            float('nan'), 0.1]))
    s['fp64_print_forms'] = (rt_config('FP64', 6, rank2=True)
                             + le('d', [1e21, 1e22, 123456789012345680000.0,
                                        1e-6, 1e-7, -0.000123]))
    s['fp32_print_forms'] = (rt_config('FP32', 4)
                             + le('f', [16777216.0, 1e10, 3e-6, -7.25]))
    s['bytes'] = (rt_config('BYTES', 5, True)
                  + rt_bytes_element(b'hello')
                  + rt_bytes_element(b'')
                  + rt_bytes_element('\u00e9\u4e2d\U0001f600'.encode())
                  + rt_bytes_element(b'\x00\x1f\x7f"\\/')
                  + rt_bytes_element(b'\xff\xc0ok\xed\xa0\x80'))
    s['empty'] = rt_config('FP32', 0, True)

    # number text (c[2] bit 2): read as strtod() and strtof() read it
    s['text_fp64'] = (rt_text_config('FP64')
                      + b'0.1,1e23,2.2250738585072011e-308,'
                        b'4.9406564584124654e-324,1.7976931348623157e308,'
                        b'123456789012345678901234567890,-0,'
                        b'0.30000000000000004,9007199254740993,1E+2,'
                        b'1e400,0e0')
    s['text_fp32'] = (rt_text_config('FP32')
                      + b'0.1,3.4028235e38,1.4e-45,16777217,3.4028236e38,'
                        b'7.038531e-26,-0.0,1e-50')
    # exactly halfway between 0 and the least subnormal: rounds to 0;
    # the same with a 1 far past 800 digits: rounds up (the sticky digit)
    half = (b'2.4703282292062327208828439643411068618252990130716238221279'
            b'284125033775363510437593264991818081799618989828234772285886'
            b'546332835517796989819938739800539093906315035659515570226392'
            b'290858392449105184435931802849936536152500319370457678249219'
            b'365623669863658480757001585769269903706311928279558551332927'
            b'834338409351978015531246597263579574622766465272827220056374'
            b'006485499977096599470454020828166226237857393450736339007967'
            b'761930577506740176324673600968951340535537458516661134223766'
            b'678604162159680461914467291840300530057530849048765391711386'
            b'591646239524912623653881879636239373280423891018672348497668'
            b'235089863388587925628302755995657524455507255189313690836254'
            b'779186948667994968324049705821028513185451396213837722826145'
            b'437693412532098591327667236328125')
    s['text_fp64_halfway'] = (rt_text_config('FP64') + half + b'e-324,'
                              + half + b'0' * 60 + b'1e-324')

    return s


# ----------------------------------------------------------------- gRPC
# protobuf written here from grpc_predict_v2.proto's field numbers

def pb_varint(n):
    n &= (1 << 64) - 1
    out = b''
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def pb_len(field, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return pb_varint(field << 3 | 2) + pb_varint(len(payload)) + payload


def pb_int(field, n):
    return pb_varint(field << 3) + pb_varint(n)


def frame(msg):
    return b'\x00' + struct.pack('>I', len(msg)) + msg


def g_config(rpc, request=False, typed=False, binary=False, max64=0,
             ihcl=0):
    return bytes([rpc | (0x20 if request else 0) | (0x40 if typed else 0)
                  | (0x80 if binary else 0), 0, max64, ihcl])


def g_output(name, dt, shape, contents=None):
    m = pb_len(1, name) + pb_len(2, dt)
    m += pb_len(3, b''.join(pb_varint(d) for d in shape))
    if contents is not None:
        m += pb_len(5, contents)
    return m


def grpc_seeds():
    s = {}
    infer = 5
    ints = le('i', [1, -2, 3, 4])
    top = pb_len(1, 'simple') + pb_len(2, '1') + pb_len(3, 'r1')
    s['infer_raw'] = g_config(infer) + frame(
        top + pb_len(5, g_output('OUTPUT0', 'INT32', [1, 4]))
        + pb_len(6, ints))
    s['infer_raw_binary'] = g_config(infer, binary=True) + s['infer_raw'][4:]
    s['infer_typed'] = g_config(infer) + frame(
        top + pb_len(5, g_output(
            'OUTPUT0', 'FP32', [2],
            pb_len(6, le('f', [0.5, -1.0]))))
        + pb_len(5, g_output(
            'OUTPUT1', 'INT64', [2],
            pb_len(3, pb_varint(-1) + pb_varint(7)))))
    s['infer_bytes'] = g_config(infer) + frame(
        top + pb_len(5, g_output('OUTPUT0', 'BYTES', [2]))
        + pb_len(6, bytes_chunk([b'ab', b''])))
    s['infer_mixed'] = g_config(infer) + frame(
        top + pb_len(5, g_output('OUTPUT0', 'FP16', [1]))
        + pb_len(5, g_output('OUTPUT1', 'UINT8', [2],
                             pb_len(4, pb_varint(1) + pb_varint(255))))
        + pb_len(6, le('e', [1.5])) + pb_len(6, b''))
    s['infer_params'] = g_config(infer) + frame(
        top + pb_len(4, pb_len(1, 'k') + pb_len(2, pb_int(1, 1)))
        + pb_len(5, g_output('OUTPUT0', 'BOOL', [1]))
        + pb_len(6, b'\x01'))
    s['live'] = g_config(0) + frame(pb_int(1, 1))
    s['ready_false'] = g_config(1) + frame(b'')
    s['model_ready'] = g_config(2) + frame(pb_int(1, 1))
    s['server_metadata'] = g_config(3) + frame(
        pb_len(1, 'triton') + pb_len(2, '2.49.0')
        + pb_len(3, 'binary_tensor_data') + pb_len(3, 'statistics'))
    tm = pb_len(1, 'INPUT0') + pb_len(2, 'INT32') + pb_len(
        3, pb_varint(1) + pb_varint(-1))
    s['model_metadata'] = g_config(4) + frame(
        pb_len(1, 'simple') + pb_len(2, '1') + pb_len(3, 'python')
        + pb_len(4, tm) + pb_len(5, tm))

    req = js({'id': 'r1', 'parameters': {'p': 1, 'q': 'x', 'b': True},
              'inputs': [tensor('INPUT0', 'INT32', [1, 4],
                                data=[1, -2, 3, 4]),
                         tensor('INPUT1', 'BYTES', [2], data=['a', 'bc'])],
              'outputs': [{'name': 'OUTPUT0'}]})
    s['request_json'] = g_config(infer, request=True) + req
    s['request_typed'] = g_config(infer, request=True, typed=True) + req
    s['request_small'] = g_config(infer, request=True, max64=1) + req
    head = js({'inputs': [tensor('INPUT0', 'FP32', [2], bds=8)]})
    s['request_binary'] = (g_config(infer, request=True, ihcl=len(head) + 1)
                           + head + le('f', [0.5, 2.0]))
    return s


# -------------------------------------------------------------------------

def write(kind, seeds):
    d = os.path.join(CORPUS, kind)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)

    for name, data in sorted(seeds.items()):
        if len(data) > MAX_SEED:
            sys.exit('seed %s/%s is %d bytes, over %d'
                     % (kind, name, len(data), MAX_SEED))

        with open(os.path.join(d, name), 'wb') as f:
            f.write(data)

    print('%-10s %3d seeds' % (kind, len(seeds)))


def main():
    write('request', request_seeds())
    write('response', resp_seeds())
    write('roundtrip', roundtrip_seeds())
    write('grpc', grpc_seeds())


if __name__ == '__main__':
    main()
