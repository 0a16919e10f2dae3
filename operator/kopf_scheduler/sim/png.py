"""A minimal PNG line chart (``replay --png``): zlib and the PNG chunk format, no imaging library.

``line_chart`` draws each series as a polyline over the same axes (x: the series' own span, y: 0
to 1), with grid lines at every quarter and a legend of coloured squares in the top-left corner,
in legend order. Each series may have its own line width, so a thin line drawn over a thick one
shows both where they coincide. No text: the caller says what the colours are.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import Final

__all__ = ["COLORS", "encode_png", "line_chart"]

Color = tuple[int, int, int]
#: the series' colours, in order: blue, orange, green, red
COLORS: Final[tuple[Color, ...]] = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40))
_BACKGROUND: Final = (255, 255, 255)
_AXIS: Final = (0, 0, 0)
_GRID: Final = (225, 225, 225)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def encode_png(width: int, height: int, pixels: bytearray) -> bytes:
    """An 8-bit RGB PNG of `pixels` (rows top to bottom, 3 bytes a pixel)."""
    if len(pixels) != width * height * 3:
        raise ValueError("encode_png: pixels must hold width * height * 3 bytes")
    stride = width * 3
    raw = b"".join(b"\x00" + bytes(pixels[y * stride : (y + 1) * stride]) for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw, 9)) + _chunk(b"IEND", b"")
    )


class _Canvas:
    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(bytes(_BACKGROUND) * (width * height))

    def dot(self, x: int, y: int, color: Color) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            i = (y * self.width + x) * 3
            self.pixels[i : i + 3] = bytes(color)

    def line(self, x0: int, y0: int, x1: int, y1: int, color: Color, thick: int = 1) -> None:
        """Bresenham's line, `thick` pixels down and right."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        while True:
            for t in range(thick):
                self.dot(x0, y0 + t, color)
                self.dot(x0 + t, y0, color)
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def box(self, x: int, y: int, w: int, h: int, color: Color) -> None:
        for yy in range(y, y + h):
            for xx in range(x, x + w):
                self.dot(xx, yy, color)


def line_chart(
    series: Sequence[Sequence[tuple[float, float]]],
    *,
    width: int = 800,
    height: int = 400,
    widths: Sequence[int] = (),
) -> bytes:
    """Each series of (x, y) points, y in 0..1, as a line in ``COLORS`` order (`widths` pixels, default 2); a PNG."""
    if len(series) > len(COLORS):
        raise ValueError(f"line_chart: at most {len(COLORS)} series")
    if width < 60 or height < 60:
        raise ValueError("line_chart: at least 60 x 60 pixels")
    canvas = _Canvas(width, height)
    left, right, top, bottom = 40, width - 10, 30, height - 20
    xs = [x for points in series for x, _ in points]
    x_min, x_max = (min(xs), max(xs)) if xs else (0.0, 1.0)
    span = (x_max - x_min) or 1.0

    def at(x: float, y: float) -> tuple[int, int]:
        px = left + round((x - x_min) / span * (right - left))
        py = bottom - round(min(max(y, 0.0), 1.0) * (bottom - top))
        return px, py

    for quarter in range(1, 5):
        y = bottom - quarter * (bottom - top) // 4
        canvas.line(left, y, right, y, _GRID)
    canvas.line(left, top, left, bottom, _AXIS)
    canvas.line(left, bottom, right, bottom, _AXIS)
    for i, points in enumerate(series):
        color = COLORS[i]
        canvas.box(left + 10 + i * 24, 8, 14, 14, color)
        placed = [at(x, y) for x, y in points]
        if len(placed) == 1:
            canvas.box(placed[0][0] - 1, placed[0][1] - 1, 3, 3, color)
        for (x0, y0), (x1, y1) in zip(placed, placed[1:]):
            canvas.line(x0, y0, x1, y1, color, thick=widths[i] if i < len(widths) else 2)
    return encode_png(width, height, canvas.pixels)
