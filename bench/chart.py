"""A small PNG bar chart with no plotting library: an RGB canvas, a 5x7 bitmap font, zlib and struct.

``write_png(path, panels)`` draws each panel as a titled list of horizontal bars (linear or log scale),
each bar labelled on the left and with its value text on the right.
"""

from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

Color = tuple[int, int, int]
WHITE: Color = (255, 255, 255)
BLACK: Color = (20, 20, 20)
GRID: Color = (225, 225, 225)
OURS: Color = (46, 110, 200)
BASELINE: Color = (150, 150, 150)
KAFKA: Color = (230, 120, 30)
LIMIT: Color = (70, 160, 90)

# 5x7 glyphs, one string per row ('#' = ink). Lower case is drawn as upper case.
_GLYPHS: dict[str, tuple[str, ...]] = {
    "A": (" ### ", "#   #", "#   #", "#####", "#   #", "#   #", "#   #"),
    "B": ("#### ", "#   #", "#   #", "#### ", "#   #", "#   #", "#### "),
    "C": (" ### ", "#   #", "#    ", "#    ", "#    ", "#   #", " ### "),
    "D": ("#### ", "#   #", "#   #", "#   #", "#   #", "#   #", "#### "),
    "E": ("#####", "#    ", "#    ", "#### ", "#    ", "#    ", "#####"),
    "F": ("#####", "#    ", "#    ", "#### ", "#    ", "#    ", "#    "),
    "G": (" ### ", "#   #", "#    ", "# ###", "#   #", "#   #", " ####"),
    "H": ("#   #", "#   #", "#   #", "#####", "#   #", "#   #", "#   #"),
    "I": (" ### ", "  #  ", "  #  ", "  #  ", "  #  ", "  #  ", " ### "),
    "J": ("  ###", "   # ", "   # ", "   # ", "   # ", "#  # ", " ##  "),
    "K": ("#   #", "#  # ", "# #  ", "##   ", "# #  ", "#  # ", "#   #"),
    "L": ("#    ", "#    ", "#    ", "#    ", "#    ", "#    ", "#####"),
    "M": ("#   #", "## ##", "# # #", "# # #", "#   #", "#   #", "#   #"),
    "N": ("#   #", "#   #", "##  #", "# # #", "#  ##", "#   #", "#   #"),
    "O": (" ### ", "#   #", "#   #", "#   #", "#   #", "#   #", " ### "),
    "P": ("#### ", "#   #", "#   #", "#### ", "#    ", "#    ", "#    "),
    "Q": (" ### ", "#   #", "#   #", "#   #", "# # #", "#  # ", " ## #"),
    "R": ("#### ", "#   #", "#   #", "#### ", "# #  ", "#  # ", "#   #"),
    "S": (" ####", "#    ", "#    ", " ### ", "    #", "    #", "#### "),
    "T": ("#####", "  #  ", "  #  ", "  #  ", "  #  ", "  #  ", "  #  "),
    "U": ("#   #", "#   #", "#   #", "#   #", "#   #", "#   #", " ### "),
    "V": ("#   #", "#   #", "#   #", "#   #", "#   #", " # # ", "  #  "),
    "W": ("#   #", "#   #", "#   #", "# # #", "# # #", "# # #", " # # "),
    "X": ("#   #", "#   #", " # # ", "  #  ", " # # ", "#   #", "#   #"),
    "Y": ("#   #", "#   #", " # # ", "  #  ", "  #  ", "  #  ", "  #  "),
    "Z": ("#####", "    #", "   # ", "  #  ", " #   ", "#    ", "#####"),
    "0": (" ### ", "#   #", "#  ##", "# # #", "##  #", "#   #", " ### "),
    "1": ("  #  ", " ##  ", "  #  ", "  #  ", "  #  ", "  #  ", " ### "),
    "2": (" ### ", "#   #", "    #", "   # ", "  #  ", " #   ", "#####"),
    "3": ("#####", "   # ", "  #  ", "   # ", "    #", "#   #", " ### "),
    "4": ("   # ", "  ## ", " # # ", "#  # ", "#####", "   # ", "   # "),
    "5": ("#####", "#    ", "#### ", "    #", "    #", "#   #", " ### "),
    "6": ("  ## ", " #   ", "#    ", "#### ", "#   #", "#   #", " ### "),
    "7": ("#####", "    #", "   # ", "  #  ", " #   ", " #   ", " #   "),
    "8": (" ### ", "#   #", "#   #", " ### ", "#   #", "#   #", " ### "),
    "9": (" ### ", "#   #", "#   #", " ####", "    #", "   # ", " ##  "),
    " ": ("     ",) * 7,
    ".": ("     ", "     ", "     ", "     ", "     ", " ##  ", " ##  "),
    ",": ("     ", "     ", "     ", "     ", " ##  ", "  #  ", " #   "),
    ":": ("     ", " ##  ", " ##  ", "     ", " ##  ", " ##  ", "     "),
    "/": ("     ", "    #", "   # ", "  #  ", " #   ", "#    ", "     "),
    "%": ("##   ", "##  #", "   # ", "  #  ", " #   ", "#  ##", "   ##"),
    "(": ("   # ", "  #  ", " #   ", " #   ", " #   ", "  #  ", "   # "),
    ")": (" #   ", "  #  ", "   # ", "   # ", "   # ", "  #  ", " #   "),
    "[": (" ### ", " #   ", " #   ", " #   ", " #   ", " #   ", " ### "),
    "]": (" ### ", "   # ", "   # ", "   # ", "   # ", "   # ", " ### "),
    "-": ("     ", "     ", "     ", "#####", "     ", "     ", "     "),
    "_": ("     ", "     ", "     ", "     ", "     ", "     ", "#####"),
    "+": ("     ", "  #  ", "  #  ", "#####", "  #  ", "  #  ", "     "),
    "=": ("     ", "     ", "#####", "     ", "#####", "     ", "     "),
    ">": ("#    ", " #   ", "  #  ", "   # ", "  #  ", " #   ", "#    "),
    "<": ("    #", "   # ", "  #  ", " #   ", "  #  ", "   # ", "    #"),
    "*": ("     ", "  #  ", "# # #", " ### ", "# # #", "  #  ", "     "),
    "?": (" ### ", "#   #", "    #", "   # ", "  #  ", "     ", "  #  "),
    "'": ("  #  ", "  #  ", " #   ", "     ", "     ", "     ", "     "),
    "|": ("  #  ", "  #  ", "  #  ", "  #  ", "  #  ", "  #  ", "  #  "),
}
SCALE = 2
CHAR_W = 6 * SCALE
LINE_H = 9 * SCALE


class Canvas:
    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(bytes(WHITE) * (width * height))

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        x0, x1 = max(0, min(x0, x1)), min(self.width, max(x0, x1))
        y0, y1 = max(0, min(y0, y1)), min(self.height, max(y0, y1))
        if x1 <= x0:
            return
        row = bytes(color) * (x1 - x0)
        for y in range(y0, y1):
            start = (y * self.width + x0) * 3
            self.pixels[start : start + len(row)] = row

    def text(self, x: int, y: int, text: str, color: Color = BLACK) -> None:
        for ch in text:
            glyph = _GLYPHS.get(ch.upper(), _GLYPHS["?"])
            for r, line in enumerate(glyph):
                for c, ink in enumerate(line):
                    if ink == "#":
                        px, py = x + c * SCALE, y + r * SCALE
                        self.rect(px, py, px + SCALE, py + SCALE, color)
            x += CHAR_W

    def png(self) -> bytes:
        raw = b"".join(
            b"\x00" + bytes(self.pixels[y * self.width * 3 : (y + 1) * self.width * 3])
            for y in range(self.height)
        )

        def chunk(kind: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)  # 8-bit RGB
        return (
            b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b"")
        )


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    text: str
    color: Color = OURS


@dataclass(frozen=True)
class Panel:
    title: str
    bars: list[Bar]
    log_scale: bool = False
    max_value: float | None = None  # linear scale: the value of a full bar (default: the largest)
    marker: float | None = None  # a vertical line at this value (e.g. a target)


LABEL_COLS = 44
VALUE_COLS = 30
BAR_W = 560
MARGIN = 16


def write_png(path: str | Path, title: str, panels: list[Panel]) -> None:
    width = MARGIN * 2 + LABEL_COLS * CHAR_W + BAR_W + VALUE_COLS * CHAR_W
    height = MARGIN + 2 * LINE_H + sum(2 * LINE_H + len(p.bars) * LINE_H + LINE_H for p in panels) + MARGIN
    canvas = Canvas(width, height)
    canvas.text(MARGIN, MARGIN, title)
    y = MARGIN + 2 * LINE_H
    x_bar = MARGIN + LABEL_COLS * CHAR_W
    for panel in panels:
        canvas.text(MARGIN, y, panel.title)
        y += int(1.5 * LINE_H)
        values = [b.value for b in panel.bars if b.value > 0]
        lo, hi = min(values, default=1.0), panel.max_value or max(values, default=1.0)
        if panel.log_scale:
            lo, hi = 10 ** math.floor(math.log10(lo)), 10 ** math.ceil(math.log10(hi))
            decades = max(1, round(math.log10(hi / lo)))
            hi = max(hi, lo * 10)
            for d in range(decades + 1):  # a grid line per decade
                gx = x_bar + int(BAR_W * d / decades)
                canvas.rect(gx, y, gx + 1, y + len(panel.bars) * LINE_H, GRID)
        if panel.marker is not None:
            mx = x_bar + _length(panel.marker, lo, hi, panel.log_scale)
            canvas.rect(mx, y, mx + 2, y + len(panel.bars) * LINE_H, BLACK)
        for bar in panel.bars:
            canvas.text(MARGIN, y + 2, bar.label[: LABEL_COLS - 1])
            if bar.value > 0:
                length = max(1, _length(bar.value, lo, hi, panel.log_scale))
                canvas.rect(x_bar, y + 2, x_bar + length, y + LINE_H - 4, bar.color)
            canvas.text(x_bar + BAR_W + CHAR_W, y + 2, bar.text[: VALUE_COLS - 1])
            y += LINE_H
        y += LINE_H
    Path(path).write_bytes(canvas.png())


def _length(value: float, lo: float, hi: float, log_scale: bool) -> int:
    if log_scale:
        return int(BAR_W * math.log10(max(value, lo) / lo) / math.log10(hi / lo))
    return int(BAR_W * min(value, hi) / hi)
