"""Content-Encoding decoding for inspection: every coding, streamed in any chunking, bounded, never crashing."""

from __future__ import annotations

import contextlib
import gzip
import zlib

import brotli
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from oatf_engine.wire.encoding import ContentDecoder, TooLarge, UndecodableBody

PLAIN = b'data: {"jsonrpc": "2.0", "method": "notifications/message"}\n\n' * 50


def raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-15)
    return compressor.compress(data) + compressor.flush()


ENCODED = {
    "gzip": gzip.compress(PLAIN),
    "deflate": zlib.compress(PLAIN),
    "br": brotli.compress(PLAIN),
    "zstd": zstandard.ZstdCompressor().compress(PLAIN),
    "identity": PLAIN,
    "": PLAIN,
}


def decode_in_chunks(encoding: str, data: bytes, size: int, limit: int = 1 << 20) -> bytes:
    decoder = ContentDecoder(encoding)
    return b"".join(decoder.decode(data[i:i + size], limit) for i in range(0, len(data), size))


@pytest.mark.parametrize("encoding", sorted(ENCODED))
@pytest.mark.parametrize("size", [1, 7, 4096])
def test_every_coding_streamed(encoding: str, size: int) -> None:
    assert decode_in_chunks(encoding, ENCODED[encoding], size) == PLAIN


def test_raw_deflate_and_multi_member_gzip_and_chains() -> None:
    assert decode_in_chunks("deflate", raw_deflate(PLAIN), 1) == PLAIN
    assert decode_in_chunks("gzip", gzip.compress(b"a" * 10) + gzip.compress(b"b" * 10), 3) == b"a" * 10 + b"b" * 10
    chained = brotli.compress(gzip.compress(PLAIN))  # Content-Encoding: gzip, br
    assert decode_in_chunks("gzip, br", chained, 11) == PLAIN
    assert decode_in_chunks("GZIP", gzip.compress(PLAIN), 100) == PLAIN


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "zstd"])
def test_bomb_is_bounded(encoding: str) -> None:
    bomb = {"gzip": gzip.compress, "deflate": zlib.compress, "br": lambda data: brotli.compress(data, quality=1),
            "zstd": zstandard.ZstdCompressor().compress}[encoding](b"\0" * (16 << 20))
    decoder = ContentDecoder(encoding)
    with pytest.raises(TooLarge):
        decoder.decode(bomb, 1 << 20)


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "zstd"])
def test_corrupt_data(encoding: str) -> None:
    with pytest.raises(UndecodableBody):
        ContentDecoder(encoding).decode(b"\x00not compressed at all" * 10, 1 << 20)


def test_unknown_coding() -> None:
    with pytest.raises(UndecodableBody):
        ContentDecoder("compress")


@settings(max_examples=200, deadline=None)
@given(encoding=st.sampled_from(["gzip", "deflate", "br", "zstd"]), data=st.binary(max_size=300),
       size=st.integers(min_value=1, max_value=64))
def test_garbage_never_raises_anything_else(encoding: str, data: bytes, size: int) -> None:
    with contextlib.suppress(TooLarge, UndecodableBody):
        decode_in_chunks(encoding, data, size, limit=4096)
