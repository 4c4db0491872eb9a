#!/usr/bin/env python3
"""Reads result directories as a BenchBase reader does, and checks them against BenchBase's format.

    python3 scripts/benchbase_check.py DIR...

Written against BenchBase's result writer (cmu-db/benchbase: DBWorkload.writeOutputs,
ResultWriter, DistributionStatistics.toMap, LatencyRecord), not against noftl's code: files named
`<bench>_<yyyy-MM-dd_HH-mm-ss>.<kind>`, found by globbing `*.summary.json` as BenchBase's own
scripts do; every summary key with the type BenchBase writes; the CSV headers BenchBase prints,
its columns first (a file may have more after them); the values of each column of the type of
BenchBase's printf format. Cross-checks what BenchBase's files imply: the samples' requests sum
to `Measured Requests`, raw.csv has one row per measured request, the elapsed time matches the
two timestamps. Standard library only. Exit status 0 when every directory passes.
"""

import csv
import glob
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

NAME = re.compile(r"^(?P<bench>.+)_(?P<ts>\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2})\.(?P<kind>.+)$")

# ResultWriter.writeSummary: key -> the Python types its JSON value may have.
SUMMARY = {
    "Start timestamp (milliseconds)": (int,),
    "Current Timestamp (milliseconds)": (int,),
    "Elapsed Time (nanoseconds)": (int,),
    "DBMS Type": (str,),
    "DBMS Version": (str,),
    "Benchmark Type": (str,),
    "Final State": (str,),
    "Measured Requests": (int,),
    # expConf.getString: a string, or null when the configuration has no such field.
    "isolation": (str, type(None)),
    "scalefactor": (str, type(None)),
    "terminals": (str, type(None)),
    "Latency Distribution": (dict,),
    "Throughput (requests/second)": (int, float),
    "Goodput (requests/second)": (int, float),
}

# DistributionStatistics.toMap: Map<String, Integer>.
DISTRIBUTION = [
    "Minimum Latency (microseconds)",
    "25th Percentile Latency (microseconds)",
    "Median Latency (microseconds)",
    "Average Latency (microseconds)",
    "75th Percentile Latency (microseconds)",
    "90th Percentile Latency (microseconds)",
    "95th Percentile Latency (microseconds)",
    "99th Percentile Latency (microseconds)",
    "Maximum Latency (microseconds)",
]

STATES = {"WARMUP", "MEASURE", "COLD_QUERY", "LATENCY_COMPLETE", "DONE", "EXIT", "ERROR"}

# ResultWriter.writeSamples: header and printf "%d,%d,%.3f,%d,%d,%d,%d,%d,%d,%d,%d,%d"; its nine
# latency columns are the distribution's, in the same order.
SAMPLES = [
    ("Time (seconds)", "number"),
    ("Requests", "int"),
    ("Throughput (requests/second)", "fixed3"),
] + [(n, "int") for n in DISTRIBUTION]

# ResultWriter.writeResults: header and printf "%d" then eleven "%.3f".
RESULTS = [("Time (seconds)", "number")] + [(n, "fixed3") for n in [
    "Throughput (requests/second)",
    "Average Latency (millisecond)",
    "Minimum Latency (millisecond)",
    "25th Percentile Latency (millisecond)",
    "Median Latency (millisecond)",
    "75th Percentile Latency (millisecond)",
    "90th Percentile Latency (millisecond)",
    "95th Percentile Latency (millisecond)",
    "99th Percentile Latency (millisecond)",
    "Maximum Latency (millisecond)",
    "tp (req/s) scaled",
]]

# ResultWriter.writeRaw: the transaction type's index (from 1), its name, the start in seconds
# since 1970 ("%10.6f"), the latency in whole microseconds, the worker, the phase.
RAW = [
    ("Transaction Type Index", "int"),
    ("Transaction Name", "str"),
    ("Start Time (microseconds)", "number"),
    ("Latency (microseconds)", "int"),
    ("Worker Id (start number)", "int"),
    ("Phase Id (index in config file)", "int"),
]


class Bad(Exception):
    pass


def check_value(path, row_no, column, kind, text):
    where = f"{path}: row {row_no}, {column!r} = {text!r}"
    try:
        if kind == "int":
            if not re.fullmatch(r"-?\d+", text):
                raise Bad(f"{where}: not an integer")
            return int(text)
        if kind == "fixed3":
            # "%.3f" of a double: Java writes NaN and Infinity for the non-finite.
            if not re.fullmatch(r"-?\d+\.\d{3}|NaN|-?Infinity", text):
                raise Bad(f"{where}: not a number with three decimals")
            return float(text)
        if kind == "number":
            return float(text.strip())
        if kind == "str":
            if text == "":
                raise Bad(f"{where}: empty")
            return text
    except ValueError:
        raise Bad(f"{where}: not a number") from None
    raise Bad(f"unknown kind {kind}")


def read_csv(path, columns):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        raise Bad(f"{path}: empty")
    header = rows[0]
    want = [c for c, _ in columns]
    if header[: len(want)] != want:
        raise Bad(f"{path}: BenchBase's columns {want} do not come first: {header}")
    out = []
    for i, r in enumerate(rows[1:], start=2):
        if len(r) != len(header):
            raise Bad(f"{path}: row {i} has {len(r)} fields, the header {len(header)}")
        out.append({c: check_value(path, i, c, k, r[j]) for j, (c, k) in enumerate(columns)})
    return out


def check_summary(path, bench):
    with open(path) as f:
        s = json.load(f)
    for key, types in SUMMARY.items():
        if key not in s:
            raise Bad(f"{path}: no {key!r}")
        # bool is an int in Python; BenchBase never writes one here.
        if isinstance(s[key], bool) or not isinstance(s[key], types):
            raise Bad(f"{path}: {key!r} is {s[key]!r}, BenchBase writes {types}")
    dist = s["Latency Distribution"]
    for key in DISTRIBUTION:
        if not isinstance(dist.get(key), int) or isinstance(dist.get(key), bool):
            raise Bad(f"{path}: Latency Distribution {key!r} is {dist.get(key)!r}, not an integer")
    if s["Benchmark Type"] != bench:
        raise Bad(f"{path}: Benchmark Type {s['Benchmark Type']!r}, file named {bench!r}")
    if s["Final State"] not in STATES:
        raise Bad(f"{path}: Final State {s['Final State']!r} is no BenchBase state")
    elapsed_ms = s["Current Timestamp (milliseconds)"] - s["Start timestamp (milliseconds)"]
    if abs(elapsed_ms - s["Elapsed Time (nanoseconds)"] / 1e6) > 1.0:
        raise Bad(f"{path}: the timestamps are {elapsed_ms} ms apart, the elapsed time says "
                  f"{s['Elapsed Time (nanoseconds)'] / 1e6} ms")
    for key in ("scalefactor", "terminals"):
        if s[key] is not None:
            float(s[key])  # BenchBase's readers turn these strings into numbers
    return s


def check_base(directory, base, kinds):
    bench = NAME.match(f"{base}.summary.json")["bench"]
    summary = check_summary(os.path.join(directory, f"{base}.summary.json"), bench)
    n = summary["Measured Requests"]
    checked = ["summary.json"]
    for kind in sorted(kinds):
        path = os.path.join(directory, f"{base}.{kind}")
        if kind == "samples.csv":
            rows = read_csv(path, SAMPLES)
            total = sum(r["Requests"] for r in rows)
            if total != n:
                raise Bad(f"{path}: {total} requests in the windows, Measured Requests {n}")
        elif kind == "results.csv" or (kind.startswith("results.") and kind.endswith(".csv")):
            read_csv(path, RESULTS)
        elif kind == "raw.csv":
            rows = read_csv(path, RAW)
            if len(rows) != n:
                raise Bad(f"{path}: {len(rows)} rows, Measured Requests {n}")
            if any(r["Transaction Type Index"] < 1 for r in rows):
                raise Bad(f"{path}: a transaction type index below 1 (BenchBase's start at 1)")
        elif kind == "params.json":
            with open(path) as f:
                json.load(f)
        elif kind == "config.xml":
            work = ET.parse(path).getroot().find("works/work/time")
            if work is None or not work.text.strip().isdigit():
                raise Bad(f"{path}: no works/work/time in whole seconds")
        else:
            continue
        checked.append(kind)
    # BenchBase writes every one of these; noftl's fs bench has no windows of its own (its
    # points are fio runs), so no samples or results there.
    needed = ["params.json", "config.xml"]
    if summary["Benchmark Type"] != "fs":
        needed += ["samples.csv", "results.csv"]
    for need in needed:
        if need not in kinds:
            raise Bad(f"{directory}: {base} has no {need}")
    return checked


def check_dir(directory):
    summaries = sorted(glob.glob(os.path.join(directory, "*.summary.json")))
    if not summaries:
        raise Bad(f"{directory}: no *.summary.json")
    bases = {}
    for path in os.listdir(directory):
        m = NAME.match(path)
        if m:
            bases.setdefault(f"{m['bench']}_{m['ts']}", set()).add(m["kind"])
    out = []
    for s in summaries:
        base = os.path.basename(s)[: -len(".summary.json")]
        out.append((base, check_base(directory, base, bases.get(base, set()))))
    return out


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    try:
        for d in argv[1:]:
            for base, kinds in check_dir(d):
                print(f"ok: {d}: {base}: {', '.join(kinds)}")
    except (Bad, OSError, ValueError, ET.ParseError) as e:
        print(f"benchbase_check: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
