"""Schemathesis hooks for the Strata log server (loaded through SCHEMATHESIS_HOOKS by
Tools/scripts/schemathesis.sh).

The protocol's two binary media types are unknown to schemathesis: without these it could not
generate or send push bodies (`application/x-strata-transactions`) or state uploads
(`application/x-strata-snapshot`). Random bytes alone would only ever reach the first check of each
endpoint, so the bodies mix
- real payloads the script captured from the live server (STRATA_SAMPLE_FRAMES: a pull's body,
  framed transactions; STRATA_SAMPLE_SNAPSHOT: a zone's snapshot) and variations of them
  (truncated, a byte flipped), which reach the storage and its exactly-once and merge checks;
- well-framed random transactions (valid varint lengths, random contents), which pass the framing
  and fail decoding;
- arbitrary bytes, including broken varints.

Generated zone names, owners and tokens are random too, so that almost every request would end
in `404 zoneNotFound`; the hooks below send part of them to the zones and tokens the script seeded
(STRATA_SAMPLE_ZONES, STRATA_SAMPLE_OWNERS, STRATA_SAMPLE_TOKENS: comma-separated), the rest as
generated.
"""

import os

import schemathesis
from hypothesis import strategies as st


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


@schemathesis.hook
def flatmap_path_parameters(ctx, path_parameters):
    if not path_parameters or "zone" not in path_parameters or not _ZONES:
        return st.just(path_parameters)
    # DELETE keeps to generated names: deleting the seeded zones over and over would leave the
    # other operations nothing but 404s.
    if ctx.operation is not None and ctx.operation.method.upper() == "DELETE":
        return st.just(path_parameters)
    return st.one_of(st.just(path_parameters), st.sampled_from([{**path_parameters, "zone": zone} for zone in _ZONES]))


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

schemathesis.openapi.media_type("application/x-strata-transactions", _bodies(_FRAMES, _framed()))
schemathesis.openapi.media_type("application/x-strata-snapshot", _bodies(_SNAPSHOT, st.binary(max_size=256)))


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
