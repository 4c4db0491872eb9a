#!/usr/bin/env python3
"""Writes the small block I/O traces of examples/traces/, one per format `noftl io --replay`
reads, all of the same requests, so that a replay of each must give the same figures.

    python3 scripts/make_traces.py [OUT_DIR]      # default: examples/traces

The workload is our own making (seeded, deterministic): 600 requests arriving about every
400 us (exponential gaps, whole microseconds), 65% reads and 35% writes of 4 to 64 KiB,
4 KiB-aligned, 80% of them in a hot fifth of a 24 MiB region, and two far beyond it (at 2 GiB
and 3 GiB, to show folding onto a smaller device). No trims: MSR traces have none.

- small.blktrace: blktrace's binary events (struct blk_io_trace, version 7, little-endian): a
  process note, then per request its queue (Q), dispatch (D) and completion (C) events.
- small.msr.csv: MSR Cambridge CSV (Windows file time in 100 ns ticks, bytes), with a header.
- small.iolog: fio's iolog version 3 (times in microseconds).
"""

import os
import random
import struct
import sys

MAGIC = 0x65617400 | 0x07
TC_READ, TC_WRITE, TC_QUEUE, TC_ISSUE, TC_COMPLETE, TC_NOTIFY = 1, 2, 1 << 4, 1 << 6, 1 << 7, 1 << 10
TA_QUEUE, TA_ISSUE, TA_COMPLETE, TN_PROCESS = 1, 7, 8, 0
# A Windows file time (100 ns ticks since 1601) in 2007, when the MSR traces were taken.
FILETIME_BASE = 128_166_372_000_000_000
DEVICE = "/dev/nvme0n1"


def requests():
    rng = random.Random(2026)
    region, hot = 24 << 20, (24 << 20) // 5
    t_us, out = 0, []
    for i in range(600):
        t_us += max(1, int(rng.expovariate(1 / 400)))
        op = "read" if rng.random() < 0.65 else "write"
        size = rng.choice([4096] * 6 + [8192] * 2 + [16384, 65536])
        span = hot if rng.random() < 0.8 else region
        offset = rng.randrange(0, span - size, 4096)
        if i in (150, 450):
            offset = (2 << 30) if i == 150 else (3 << 30)
        out.append((t_us, op, offset, size))
    return out


def blk_event(seq, time_ns, sector, nbytes, action, pdu=b""):
    return struct.pack(
        "<IIQQIIIIIHH", MAGIC, seq, time_ns, sector, nbytes, action, 4242, (259 << 20), 0, 0, len(pdu)
    ) + pdu


def blktrace(reqs):
    # (time, sector, bytes, action, data), as blk_event takes them after the sequence number.
    events = [(0, 0, 0, TN_PROCESS | (TC_NOTIFY << 16), b"fio\0")]
    for t_us, op, offset, size in reqs:
        rw = TC_READ if op == "read" else TC_WRITE
        t = t_us * 1000
        for dt, action in ((0, TA_QUEUE | ((rw | TC_QUEUE) << 16)),
                           (2_000, TA_ISSUE | ((rw | TC_ISSUE) << 16)),
                           (90_000, TA_COMPLETE | ((rw | TC_COMPLETE) << 16))):
            events.append((t + dt, offset // 512, size, action, b""))
    events.sort(key=lambda e: e[0])
    return b"".join(blk_event(i, *e) for i, e in enumerate(events))


def msr(reqs):
    lines = ["Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime"]
    for t_us, op, offset, size in reqs:
        lines.append(f"{FILETIME_BASE + t_us * 10},noftl,0,{op.capitalize()},{offset},{size},900")
    return "\n".join(lines) + "\n"


def iolog(reqs):
    lines = ["fio version 3 iolog", f"0 {DEVICE} add", f"0 {DEVICE} open"]
    for t_us, op, offset, size in reqs:
        lines.append(f"{t_us} {DEVICE} {op} {offset} {size}")
    lines.append(f"{reqs[-1][0]} {DEVICE} close")
    return "\n".join(lines) + "\n"


def main(argv):
    out = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "examples", "traces")
    os.makedirs(out, exist_ok=True)
    reqs = requests()
    with open(os.path.join(out, "small.blktrace"), "wb") as f:
        f.write(blktrace(reqs))
    with open(os.path.join(out, "small.msr.csv"), "w") as f:
        f.write(msr(reqs))
    with open(os.path.join(out, "small.iolog"), "w") as f:
        f.write(iolog(reqs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
