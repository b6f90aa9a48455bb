"""Build camera128.csv, the 128 x 128 crop of camera.png used by the BPFA inpainting benchmark.

camera.png is the copied scikit-image `camera` photograph (512 x 512, 8-bit grayscale; CC0). The
PNG is decoded with the standard library (zlib + PNG's five row filters), so no imaging package is
needed. The crop is rows 64-191, columns 192-319 (the photographer's head and camera: edges and
smooth regions). Run from anywhere:  python models/bpfa/make_data.py
"""

import csv
import struct
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROWS, COLS = slice(64, 192), slice(192, 320)


def read_gray_png(path: Path) -> list[list[int]]:
    """Pixels of an 8-bit grayscale, non-interlaced PNG, row by row."""
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG file")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color, _, _, interlace = header
    if (depth, color, interlace) != (8, 0, 0):
        raise ValueError(f"{path}: only 8-bit grayscale non-interlaced PNGs are supported")
    raw = zlib.decompress(idat)
    rows, prev = [], [0] * width
    for r in range(height):
        start = r * (width + 1)
        filt, line = raw[start], list(raw[start + 1 : start + 1 + width])
        out = []
        for i, x in enumerate(line):
            a = out[i - 1] if i else 0
            b, c = prev[i], prev[i - 1] if i else 0
            if filt == 1:
                x += a
            elif filt == 2:
                x += b
            elif filt == 3:
                x += (a + b) // 2
            elif filt == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                x += a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            out.append(x & 0xFF)
        rows.append(out)
        prev = out
    return rows


def main() -> None:
    pixels = read_gray_png(HERE / "data" / "camera.png")
    crop = [row[COLS] for row in pixels[ROWS]]
    with open(HERE / "data" / "camera128.csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow([f"x{j}" for j in range(len(crop[0]))])
        w.writerows(crop)
    print(f"wrote {HERE / 'data' / 'camera128.csv'}: {len(crop)} x {len(crop[0])}")


if __name__ == "__main__":
    main()
