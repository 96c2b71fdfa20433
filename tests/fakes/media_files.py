"""Small real media files made at test time: an OGG/Opus voice note (Opus silence frames in a real Ogg
container, as Telegram and WhatsApp send voice notes), a PNG photo and a PDF."""

from __future__ import annotations

import io
import struct


def _crc_table() -> list[int]:
    table = []
    for i in range(256):
        r = i << 24
        for _ in range(8):
            r = ((r << 1) ^ 0x04C11DB7) if r & 0x80000000 else r << 1
        table.append(r & 0xFFFFFFFF)
    return table


_CRC = _crc_table()


def _ogg_crc(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc = ((crc << 8) ^ _CRC[((crc >> 24) & 0xFF) ^ byte]) & 0xFFFFFFFF
    return crc


def _page(packets: list[bytes], granule: int, serial: int, sequence: int, flags: int) -> bytes:
    lacing = []
    for packet in packets:
        lacing += [255] * (len(packet) // 255) + [len(packet) % 255]
    header = b"OggS" + struct.pack("<BBqIIIB", 0, flags, granule, serial, sequence, 0, len(lacing)) + bytes(lacing)
    page = header + b"".join(packets)
    crc = _ogg_crc(page)
    return page[:22] + struct.pack("<I", crc) + page[26:]


def ogg_opus(seconds: float) -> bytes:
    """A mono OGG/Opus file of ``seconds`` of silence (20 ms CELT frames), with a real duration header."""
    serial = 0x5B0A1234
    head = b"OpusHead" + struct.pack("<BBHIhB", 1, 1, 312, 48000, 0, 0)
    vendor = b"switchboard tests"
    tags = b"OpusTags" + struct.pack("<I", len(vendor)) + vendor + struct.pack("<I", 0)
    pages = [_page([head], 0, serial, 0, 0x02), _page([tags], 0, serial, 1, 0)]
    frames = max(1, round(seconds * 50))
    silence = b"\xf8\xff\xfe"  # TOC: CELT fullband 20 ms mono; the frame: silence
    granule, sequence = 312, 2
    for start in range(0, frames, 50):
        count = min(50, frames - start)
        granule += count * 960
        last = start + count >= frames
        pages.append(_page([silence] * count, granule, serial, sequence, 0x04 if last else 0))
        sequence += 1
    return b"".join(pages)


def png(width: int = 64, height: int = 48, color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, "PNG")
    return out.getvalue()


def pdf(lines: list[str]) -> bytes:
    from fpdf import FPDF

    doc = FPDF()
    doc.add_page()
    doc.set_font("Helvetica", size=12)
    for line in lines:
        doc.cell(0, 10, line, new_x="LMARGIN", new_y="NEXT")
    return bytes(doc.output())
