#!/usr/bin/env python3
"""Loads every CSV file of result directories with pandas and with DuckDB, and checks both agree.

    .venv/bin/python scripts/results_frames.py DIR...

What a researcher's first cell does with a result directory (docs/results.md): each
`*.samples.csv`, `*.results*.csv` and `*.raw.csv` read by `pandas.read_csv` and by DuckDB's
`read_csv_auto` with their default options, no hints. Checks that both see the same rows and
columns, that BenchBase's columns and the flash counters come out as numbers (not text), and
that DuckDB can aggregate across the files of a directory by name, as in
`SELECT sum("Requests") FROM '*.samples.csv'`. Needs the Python packages pandas and duckdb
(scripts/install-test-deps.sh puts them into .venv). Exit status 0 when every file loads.
"""

import glob
import json
import os
import sys

import duckdb
import pandas as pd

# Columns that must load as numbers wherever a file has them.
NUMERIC = [
    "Time (seconds)",
    "Requests",
    "Throughput (requests/second)",
    "Median Latency (microseconds)",
    "99th Percentile Latency (microseconds)",
    "Average Latency (millisecond)",
    "Transaction Type Index",
    "Start Time (microseconds)",
    "Latency (microseconds)",
    "Worker Id (start number)",
    "window_s",
    "flash_programs",
    "gc_migrations",
    "latency_us",
]


def check_file(con, path):
    frame = pd.read_csv(path)
    described = con.execute(f"DESCRIBE SELECT * FROM read_csv_auto('{path}')").fetchall()
    cols = [d[0] for d in described]
    types = {d[0]: d[1] for d in described}
    rows = con.execute(f"SELECT count(*) FROM read_csv_auto('{path}')").fetchone()[0]
    if list(frame.columns) != cols:
        raise SystemExit(f"{path}: pandas sees {list(frame.columns)}, DuckDB {cols}")
    if len(frame) != rows:
        raise SystemExit(f"{path}: pandas reads {len(frame)} rows, DuckDB {rows}")
    for c in NUMERIC:
        if c not in frame.columns or len(frame) == 0:
            continue
        if not pd.api.types.is_numeric_dtype(frame[c]):
            raise SystemExit(f"{path}: pandas reads {c!r} as {frame[c].dtype}")
        if str(types[c]) not in ("BIGINT", "INTEGER", "DOUBLE", "SMALLINT", "TINYINT", "FLOAT"):
            raise SystemExit(f"{path}: DuckDB reads {c!r} as {types[c]}")
    return len(frame)


def main(argv):
    con = duckdb.connect()
    for d in argv[1:]:
        files = sorted(glob.glob(os.path.join(d, "*.csv")))
        if not files:
            raise SystemExit(f"{d}: no CSV files")
        for f in files:
            n = check_file(con, f)
            print(f"ok: {f}: {n} rows")
        # Across the directory by name: the windows' requests are the summary's.
        summary = glob.glob(os.path.join(d, "*.summary.json"))[0]
        with open(summary) as fh:
            measured = json.load(fh)["Measured Requests"]
        pattern = os.path.join(d, "*.samples.csv")
        total = con.execute(
            f"SELECT sum(\"Requests\") FROM read_csv_auto('{pattern}')"
        ).fetchone()[0]
        if total != measured:
            raise SystemExit(f"{d}: DuckDB sums {total} requests, the summary {measured}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
