"""Small crafted image files for the tests of bon's image checks: a PNG whose header claims any size
(a few hundred bytes, never the pixels it claims), a truncated PNG, bytes that are no image."""

from __future__ import annotations

import io
import struct
import zlib

from PIL import Image


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def huge_png(width: int = 20000, height: int = 20000) -> bytes:
    """A valid PNG header claiming ``width`` x ``height`` RGB pixels, with one short row of data: a
    decoder that trusts the header allocates width x height x 3 bytes before it finds the data short."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(b"\0" * 16))
            + _chunk(b"IEND", b""))


def png(colour: tuple[int, int, int] = (255, 0, 0), size: tuple[int, int] = (6, 4)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="PNG")
    return buf.getvalue()


def truncated_png() -> bytes:
    """A real PNG (noise, so its pixel data is long) cut short in its pixel data."""
    noise = bytes((i * 7919 + i // 3) % 256 for i in range(64 * 64 * 3))
    buf = io.BytesIO()
    Image.frombytes("RGB", (64, 64), noise).save(buf, format="PNG")
    return buf.getvalue()[: len(buf.getvalue()) // 2]


NOT_AN_IMAGE = b"this is not an image, only text\n"
