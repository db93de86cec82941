"""Schemathesis hooks for the Strata log server (loaded through SCHEMATHESIS_HOOKS by
Tools/scripts/schemathesis.sh).

The protocol's two binary media types are unknown to schemathesis: without these it could not
generate or send push bodies (`application/x-strata-transactions`) or state uploads
(`application/x-strata-snapshot`). Random bytes alone would only ever reach the first check of each
endpoint, so the bodies mix
- real payloads the script captured from the live server (STRATA_SAMPLE_FRAMES: a pull's body,
  framed transactions; STRATA_SAMPLE_SNAPSHOT: a zone's snapshot; STRATA_SAMPLE_CHUNK: a chunk of
  an asset whose upload the script began, and STRATA_SAMPLE_CHUNK_LZ4: the LZ4 block of it a server
  answered) and variations of them (truncated, a byte flipped), which reach the storage and its
  exactly-once, merge and chunk checks;
- well-framed random transactions (valid varint lengths, random contents), which pass the framing
  and fail decoding;
- arbitrary bytes, including broken varints.

Generated zone names, owners, tokens, asset hashes and chunk indexes are random too, so that
almost every request would end in `404 zoneNotFound` or `404 assetNotFound`; the hooks below send
part of them to the zones, tokens and assets the script seeded (STRATA_SAMPLE_ZONES,
STRATA_SAMPLE_OWNERS, STRATA_SAMPLE_TOKENS, STRATA_SAMPLE_ASSETS: comma-separated), the rest as
generated.

An upload's manifest is sometimes a seeded asset's real one (STRATA_SAMPLE_MANIFESTS:
comma-separated files), sent to that asset's path. A chunk body that is the LZ4 sample is sent
with `Strata-Chunk-Encoding: lz4` and its `Strata-Chunk-Length` (STRATA_SAMPLE_CHUNK_LZ4_LENGTH),
so that the server decompresses it; any other body keeps the headers schemathesis generated.
"""

import ast
import json
import os
import threading

import schemathesis
from hypothesis import strategies as st

# Hypothesis describes strategies by parsing the source of their lambdas (`ast.parse`), from
# both workers' threads at once; CPython before 3.12 keeps the parser's recursion depth in global
# state, and two parses at once fail now and then with "SystemError: AST constructor recursion
# depth mismatch" — a runtime error of the run, not a finding. One parse at a time.
_ast_parse = ast.parse
_ast_parse_lock = threading.Lock()


def _parse_one_at_a_time(*args, **kwargs):
    with _ast_parse_lock:
        return _ast_parse(*args, **kwargs)


ast.parse = _parse_one_at_a_time


def _sample(variable):
    path = os.environ.get(variable, "")
    if not path or not os.path.exists(path):
        return b""
    with open(path, "rb") as handle:
        return handle.read()


def _varint(value):
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@st.composite
def _framed(draw):
    frames = draw(st.lists(st.binary(max_size=64), max_size=4))
    return b"".join(_varint(len(frame)) + frame for frame in frames)


@st.composite
def _mutated(draw, sample):
    """The sample truncated, or with one byte changed."""
    if not sample:
        return b""
    if draw(st.booleans()):
        return sample[: draw(st.integers(min_value=0, max_value=len(sample) - 1))]
    index = draw(st.integers(min_value=0, max_value=len(sample) - 1))
    byte = draw(st.integers(min_value=0, max_value=255))
    return sample[:index] + bytes([byte]) + sample[index + 1 :]


def _bodies(sample, structured):
    choices = [structured, st.binary(max_size=256)]
    if sample:
        choices = [st.just(sample), _mutated(sample)] + choices
    return st.one_of(*choices)


def _list(variable):
    return [item for item in os.environ.get(variable, "").split(",") if item]


_ZONES = _list("STRATA_SAMPLE_ZONES")
_OWNERS = _list("STRATA_SAMPLE_OWNERS")
_TOKENS = _list("STRATA_SAMPLE_TOKENS")


_ASSETS = _list("STRATA_SAMPLE_ASSETS")


@schemathesis.hook
def flatmap_path_parameters(ctx, path_parameters):
    if not path_parameters or "zone" not in path_parameters or not _ZONES:
        return st.just(path_parameters)
    # DELETE keeps to generated names: deleting the seeded zones over and over would leave the
    # other operations nothing but 404s.
    if ctx.operation is not None and ctx.operation.method.upper() == "DELETE":
        return st.just(path_parameters)
    seeded = {"zone": st.sampled_from(_ZONES)}
    if "sha256" in path_parameters and _ASSETS:
        seeded["sha256"] = st.sampled_from(_ASSETS)
    if "index" in path_parameters:
        seeded["index"] = st.sampled_from([0, 1, 2])
    # As generated; every seeded value at once (a real asset of a real zone: its manifest and
    # chunks); or each seeded value taken or not on its own (a seeded zone with a generated hash
    # reaches the asset checks of a real zone, a seeded hash in a generated zone the zone's).
    every = {key: seeded.get(key, st.just(value)) for key, value in path_parameters.items()}
    mixed = {key: st.one_of(st.just(value), seeded[key]) if key in seeded else st.just(value)
             for key, value in path_parameters.items()}
    return st.one_of(st.just(path_parameters), st.fixed_dictionaries(every), st.fixed_dictionaries(mixed))


@schemathesis.hook
def flatmap_query(ctx, query):
    query = query or {}
    choices = [st.just(query)]
    if "owner" in query:
        without = {key: value for key, value in query.items() if key != "owner"}
        choices.append(st.just(without))
        if _OWNERS:
            choices.append(st.sampled_from([{**query, "owner": owner} for owner in _OWNERS]))
    if "after" in query and _TOKENS:
        choices.append(st.sampled_from([{**query, "after": token} for token in _TOKENS]))
    return st.one_of(*choices)


_FRAMES = _sample("STRATA_SAMPLE_FRAMES")
_SNAPSHOT = _sample("STRATA_SAMPLE_SNAPSHOT")
_CHUNK = _sample("STRATA_SAMPLE_CHUNK")
_CHUNK_LZ4 = _sample("STRATA_SAMPLE_CHUNK_LZ4")
_CHUNK_LZ4_LENGTH = os.environ.get("STRATA_SAMPLE_CHUNK_LZ4_LENGTH", "")


def _chunks():
    choices = [_bodies(_CHUNK, st.binary(max_size=256))]
    if _CHUNK_LZ4:
        choices.append(st.just(_CHUNK_LZ4))
    return st.one_of(*choices)


schemathesis.openapi.media_type("application/x-strata-transactions", _bodies(_FRAMES, _framed()))
schemathesis.openapi.media_type("application/x-strata-snapshot", _bodies(_SNAPSHOT, st.binary(max_size=256)))
schemathesis.openapi.media_type("application/octet-stream", _chunks())


def _manifests():
    found = []
    for path in _list("STRATA_SAMPLE_MANIFESTS"):
        with open(path, encoding="utf-8") as handle:
            found.append(json.load(handle))
    return found


_MANIFESTS = _manifests()


@schemathesis.hook
def flatmap_body(ctx, body):
    # An upload's manifest: as generated (it never names the asset of the path), or a seeded
    # asset's real one, sent to that asset's path (below).
    operation = ctx.operation
    if not _MANIFESTS or operation is None or operation.method.upper() != "PUT" or not operation.path.endswith("/assets/{sha256}"):
        return st.just(body)
    return st.one_of(st.just(body), st.sampled_from(_MANIFESTS))


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    # The LZ4 sample travels as what it is; the server must decompress it and check the chunk.
    if _CHUNK_LZ4 and _CHUNK_LZ4_LENGTH and isinstance(case.body, (bytes, bytearray)) and bytes(case.body) == _CHUNK_LZ4:
        case.headers = {**(case.headers or {}), "Strata-Chunk-Encoding": "lz4", "Strata-Chunk-Length": _CHUNK_LZ4_LENGTH}
    # A real manifest goes to its own asset's path.
    if isinstance(case.body, dict) and case.body in _MANIFESTS and case.path_parameters and "sha256" in case.path_parameters:
        case.path_parameters = {**case.path_parameters, "sha256": case.body["sha256"]}


# Answers in the binary media types are checked too: a pull's body must split into frames exactly
# (no truncated varint, no frame running past the end, no empty frame), and a snapshot must not be
# empty. What schemathesis then validates against the schema (`type: string`) is the body in hex.
@schemathesis.deserializer("application/x-strata-transactions")
def _frames_answer(ctx, response):
    body = response.content
    offset = 0
    index = 0
    while offset < len(body):
        length = 0
        shift = 0
        while True:
            if offset >= len(body):
                raise ValueError(f"frame {index}: the length varint is truncated")
            byte = body[offset]
            offset += 1
            length |= (byte & 0x7F) << shift
            if byte & 0x80 == 0:
                break
            shift += 7
            if shift > 63:
                raise ValueError(f"frame {index}: the length varint is longer than 64 bits")
        if length == 0:
            raise ValueError(f"frame {index}: an empty transaction")
        if offset + length > len(body):
            raise ValueError(f"frame {index}: {length} bytes announced, {len(body) - offset} remain")
        offset += length
        index += 1
    return body.hex()


@schemathesis.deserializer("application/x-strata-snapshot")
def _snapshot_answer(ctx, response):
    if not response.content:
        raise ValueError("an empty snapshot")
    return response.content.hex()


# An asset's chunk: 1 to 1048576 bytes as they are, or an LZ4 block (never longer than the chunk
# it saves an eighth of) with the chunk's length in Strata-Chunk-Length.
@schemathesis.deserializer("application/octet-stream")
def _chunk_answer(ctx, response):
    body = response.content
    if not body:
        raise ValueError("an empty chunk")
    if len(body) > 1048576:
        raise ValueError(f"a chunk of {len(body)} bytes; a chunk has at most 1048576")
    encoding = response.headers.get("Strata-Chunk-Encoding")
    length = response.headers.get("Strata-Chunk-Length")
    if isinstance(encoding, list):
        encoding = encoding[0] if encoding else None
    if isinstance(length, list):
        length = length[0] if length else None
    if encoding is not None and (encoding != "lz4" or length is None or not length.isdigit() or len(body) >= int(length)):
        raise ValueError(f"Strata-Chunk-Encoding {encoding!r} with Strata-Chunk-Length {length!r} for a body of {len(body)} bytes")
    return body.hex()
