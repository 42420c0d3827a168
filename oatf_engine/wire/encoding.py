"""Streaming `Content-Encoding` decoding for inspection (RFC 9110 §8.4; gzip and deflate RFC 9112 §7.2 /
RFC 1950–1952, br RFC 7932, zstd RFC 8878).

Only the copy the decoders read is decoded; the bytes forwarded by the proxy are never touched. Each call
is bounded: `decode(data, limit)` raises `TooLarge` instead of producing more than `limit` bytes, so a
compression bomb costs at most `limit` bytes (plus one zstd write block) of memory.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Protocol

import brotli
import zstandard


class TooLarge(Exception):
    """Decoding would produce more than the allowed number of bytes."""


class UndecodableBody(Exception):
    """The body is not valid for its declared content coding."""


class _Coding(Protocol):
    def decode(self, data: bytes, limit: int) -> bytes: ...


class _Zlib:
    """gzip (members concatenated as RFC 1952 §2.2 allows) and deflate (zlib-wrapped as RFC 9112 §7.2
    specifies, or raw deflate as some servers send)."""

    def __init__(self, wbits: int) -> None:
        self._wbits = wbits
        self._decomp = zlib.decompressobj(wbits)
        # deflate only: the input read before zlib accepted its header, to retry it as raw deflate
        self._head: bytes | None = b"" if wbits == zlib.MAX_WBITS else None

    def decode(self, data: bytes, limit: int) -> bytes:
        out = bytearray()
        while data:
            try:
                out += self._decomp.decompress(data, limit + 1 - len(out))
            except zlib.error as exc:
                if self._head is None:
                    raise UndecodableBody(f"deflate/gzip: {exc}") from exc
                data, self._head = self._head + data, None
                self._wbits = -zlib.MAX_WBITS  # raw deflate, without the zlib wrapper
                self._decomp = zlib.decompressobj(self._wbits)
                continue
            if self._head is not None:
                self._head = None if out or len(self._head) + len(data) > 2 else self._head + data
            if len(out) > limit or self._decomp.unconsumed_tail:
                raise TooLarge
            data = self._decomp.unused_data if self._decomp.eof else b""
            if data:  # another gzip member follows
                self._decomp = zlib.decompressobj(self._wbits)
        return bytes(out)


class _Brotli:
    def __init__(self) -> None:
        self._decomp = brotli.Decompressor()

    def decode(self, data: bytes, limit: int) -> bytes:
        try:
            out = self._decomp.process(data, output_buffer_limit=limit + 1)
        except brotli.error as exc:
            raise UndecodableBody(f"br: {exc}") from exc
        if len(out) > limit or not self._decomp.can_accept_more_data():
            raise TooLarge
        return out


class _BoundedSink:
    """Where zstd writes decoded blocks; refuses to hold more than `limit` bytes."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.limit = 0

    def write(self, data: bytes) -> int:
        self.buffer += data
        if len(self.buffer) > self.limit:
            raise TooLarge
        return len(data)


class _Zstd:
    def __init__(self) -> None:
        self._sink = _BoundedSink()
        # zstandard's stub asks for IO[bytes]; the writer only calls the sink's write().
        self._writer = zstandard.ZstdDecompressor().stream_writer(
            self._sink, write_size=1 << 16  # type: ignore[arg-type]
        )

    def decode(self, data: bytes, limit: int) -> bytes:
        self._sink.limit = limit
        try:
            self._writer.write(data)
        except zstandard.ZstdError as exc:
            raise UndecodableBody(f"zstd: {exc}") from exc
        out = bytes(self._sink.buffer)
        self._sink.buffer.clear()
        return out


_CODINGS: dict[str, Callable[[], _Coding]] = {
    "gzip": lambda: _Zlib(zlib.MAX_WBITS | 16),
    "x-gzip": lambda: _Zlib(zlib.MAX_WBITS | 16),
    "deflate": lambda: _Zlib(zlib.MAX_WBITS),
    "br": _Brotli,
    "zstd": _Zstd,
}


class ContentDecoder:
    """Undo a `Content-Encoding` header's codings, last applied first, incrementally."""

    __slots__ = ("_chain",)

    def __init__(self, content_encoding: str | None) -> None:
        """Raises UndecodableBody for a coding it does not know (e.g. `compress`)."""
        names = [name.strip().lower() for name in (content_encoding or "").split(",")]
        chain: list[_Coding] = []
        for name in reversed(names):
            if name in ("", "identity"):
                continue
            factory = _CODINGS.get(name)
            if factory is None:
                raise UndecodableBody(f"unsupported content coding {name!r}")
            chain.append(factory())
        self._chain = chain

    def decode(self, data: bytes, limit: int) -> bytes:
        """The decoded bytes `data` completes; TooLarge if they would exceed `limit`, UndecodableBody if
        the data is corrupt."""
        for coding in self._chain:
            data = coding.decode(data, limit)
        if len(data) > limit:
            raise TooLarge
        return data
