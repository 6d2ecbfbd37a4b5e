#!/usr/bin/env python3
"""run_report.py page REPORT.html LOG.jsonl STEPS: the page's embedded log (script#run-log) is the
--log file's lines, object for object; it draws 4 charts, the training loss through STEPS points
and the validation loss as dots; it fetches nothing (no src=/href= to elsewhere, no script but the
data). run_report.py png SHOT.png: a browser's screenshot that is not blank (enough pixels off
white, in several of the charts' colours). Exit 1 naming what is wrong. Standard library only."""
import json
import re
import struct
import sys
import zlib


def page(html_path, log_path, steps):
    html = open(html_path, encoding="utf-8").read()
    problems = []
    m = re.search(r'<script type="application/json" id="run-log">(.*?)</script>', html, re.S)
    if not m:
        return ["no embedded log (script#run-log)"]
    embedded = json.loads(m.group(1))
    logged = [json.loads(line) for line in open(log_path, encoding="utf-8") if line.strip()]
    if embedded != logged:
        problems.append(f"embedded log ({len(embedded)} lines) differs from the --log file ({len(logged)} lines)")
    if html.count("<svg") != 4:
        problems.append(f"{html.count('<svg')} charts, not 4")
    lines = re.findall(r'<polyline[^>]*stroke="#1f77b4"[^>]*points="([^"]*)"', html)
    if not lines or len(lines[0].split()) != steps:
        problems.append(f"the training loss is not drawn through {steps} points: {[len(l.split()) for l in lines]}")
    if html.count('fill="#d62728"') < 1:
        problems.append("no validation loss dots")
    if re.search(r'\b(src|href)\s*=', html) or len(re.findall(r"<script", html)) != 1:
        problems.append("the page fetches something or runs a script")
    return problems


def png_pixels(path):
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB/RGBA non-interlaced PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or colour not in (2, 6) or interlace:
                raise ValueError(f"unsupported PNG (depth {depth}, colour type {colour}, interlace {interlace})")
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, previous = zlib.decompress(idat), width * channels, [], bytearray(width * channels)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(line)
        previous = line
    return width, height, channels, rows


def png(path):
    width, height, channels, rows = png_pixels(path)
    inked, colours = 0, set()
    series = {(0x1f, 0x77, 0xb4), (0xd6, 0x27, 0x28), (0x2c, 0xa0, 0x2c), (0x94, 0x67, 0xbd), (0xff, 0x7f, 0x0e)}
    for row in rows:
        for x in range(0, width * channels, channels):
            rgb = tuple(row[x:x + 3])
            if rgb != (255, 255, 255):
                inked += 1
            if rgb in series:
                colours.add(rgb)
    problems = []
    if inked < 0.01 * width * height:
        problems.append(f"the screenshot is blank ({inked} of {width * height} pixels off white)")
    if len(colours) < 4:
        problems.append(f"only {len(colours)} of the charts' 5 colours on screen")
    return problems


if __name__ == "__main__":
    found = page(sys.argv[2], sys.argv[3], int(sys.argv[4])) if sys.argv[1] == "page" else png(sys.argv[2])
    for problem in found:
        print(problem)
    sys.exit(1 if found else 0)
