#!/usr/bin/env python3
"""Functions longer than a limit in the workspace's sources (crates/*/src), and a check.

A function is counted from its `fn` line to its closing brace, comments and blank lines
included (what a reader has to hold at once). Braces inside string and char literals and line
comments are ignored. Test code counts too: a long test is as hard to read as a long function.

  scripts/fnlen.py                 list the functions over 150 lines, longest first
  scripts/fnlen.py --max-lines N   the limit (default 150)
  scripts/fnlen.py --check K       exit 1 when more than K functions are over the limit
"""
import argparse
import glob
import os
import re
import sys

FN = re.compile(r'^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+([A-Za-z_0-9]+)')


def strip(line):
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])'", "''", line)
    return line.split('//')[0]


def long_functions(root, max_lines):
    out = []
    for path in sorted(glob.glob(os.path.join(root, 'crates/*/src/**/*.rs'), recursive=True)):
        with open(path, encoding='utf-8') as f:
            lines = f.read().split('\n')
        i = 0
        while i < len(lines):
            m = FN.match(lines[i])
            if not m or lines[i].rstrip().endswith(';'):
                i += 1
                continue
            depth, started, j = 0, False, i
            while j < len(lines):
                code = strip(lines[j])
                depth += code.count('{') - code.count('}')
                started = started or '{' in code
                if started and depth <= 0:
                    break
                j += 1
            n = j - i + 1
            if n > max_lines:
                out.append((n, os.path.relpath(path, root), i + 1, m.group(6)))
            i += 1
    return sorted(out, key=lambda t: (-t[0], t[1], t[2]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--root', default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument('--max-lines', type=int, default=150)
    ap.add_argument('--check', type=int, metavar='K')
    a = ap.parse_args()
    found = long_functions(a.root, a.max_lines)
    for n, path, line, name in found:
        print(f'{n:5} lines  {path}:{line}  {name}')
    print(f'functions over {a.max_lines} lines: {len(found)}')
    if a.check is not None and len(found) > a.check:
        print(f'error: {len(found)} functions over {a.max_lines} lines, the limit is {a.check}', file=sys.stderr)
        sys.exit(1)


if __name__ == '__main__':
    main()
