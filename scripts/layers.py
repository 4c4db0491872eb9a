#!/usr/bin/env python3
"""Import structure of the workspace, drawn from the code's own imports, and checked.

The project's layering rule: crates form layers (each knows only the crates below it), and
inside a crate the modules form layers too, with no import circles. This script measures both.

Crates. The workspace members (root Cargo.toml) and, for each, the [dependencies] that are
path or workspace-path dependencies (external and dev-dependencies are left out). The crates
are drawn in floors and any crate-level cycle is flagged.

Modules. Inside each crate every .rs file under src/ is one node (a file module): src/lib.rs or
src/main.rs is the crate root (named `crate` here), src/a.rs and src/a/mod.rs are `a`,
src/a/b.rs is `a::b`. src/bin/, tests/, benches/ and examples/ are not read; a file whose
`mod` declaration (or whose own `#![cfg(test)]`) makes it test-only is left out.

How a file's references are found:
  1. Comments (including doc comments) and string, byte-string, raw-string and char literals
     are blanked, so nothing inside them counts (and braces in them do not upset step 2).
  2. Test-only code is blanked: every item, statement or field after `#[cfg(test)]` (usually a
     `mod tests { ... }` block, found by matching braces), and `pub(in path)` visibilities.
  3. `use` declarations anywhere in the file (not just at the top) are parsed as trees, e.g.
     `use crate::{a::X, b::{c, d}};` or `use super::{x, y};`, and every other path in the code
     that starts with `crate::`, `$crate::`, `super::`, `self::`, or with a name that is a
     module in scope (a child module, or a module brought in by a `use`, including through a
     `use super::*` glob) is read too, e.g. `crate::results::write(...)` inside a function.
  4. A path is resolved to the deepest module file that exists: `crate::a::b::Thing` is `a::b`
     when src/a/b.rs (or a/b/mod.rs) exists, else `a`. `super` is the parent of the file's
     module (for a/b.rs that is `a`; for a/mod.rs it is the root). When the first name after
     the module is not defined in that file but imported there (a re-export such as
     `pub use engine::{Engine, EngineConfig}` in lib.rs, or `pub use b::Thing` in a/mod.rs),
     the path is followed to where the name comes from; a name defined in lib.rs stays at the
     root. `mod x;` declarations are not references. Self-edges are dropped.
  5. A `pub use` that only re-exports (lib.rs's `pub use engine::Engine` when lib.rs's own
     code never names `Engine`) is not an edge: the references through it are followed to the
     source instead (step 4), so a facade is not drawn as importing everything it exposes.
     A lowercase name counts as used by the file's code only when called or used as a path
     (`name(`, `name!`, `name::`).
Every edge "A -> B" (A imports B) keeps the symbols (and lines) that caused it.

What is reported, per crate:
  * floors: a layering of the condensation of the import graph: floor 0 holds the modules that
    import no other module of the crate, floor n is 1 + the highest floor of what a module
    imports; a circle is one floor entry, drawn as {a, b, c};
  * circles: the strongly connected components (Tarjan) with more than one file;
  * upward imports ("imports that run back up a floor"): inside each circle, a small feedback
    arc set: the Eades-Lin-Smyth greedy order (ties broken by name, so it is deterministic),
    improved by sifting (a file moves to the place in the order that leaves fewer backward
    edges, while any move helps), whose backward edges are then pruned to a minimal set (an
    edge stays out only if putting it back would close a circle). Each such edge goes against
    the best layer order found; removing all of them leaves no circle. Edges count once each,
    however many symbols they carry. No circles means no upward imports.
Totals: "circles: N (files: M), upward imports: K".

Usage:
    scripts/layers.py [--root DIR] [--crate NAME] [--json FILE|-]
    scripts/layers.py --check [--max-circles N] [--max-upward K]   # for CI; limits default 0

--check exits 1 (with the reasons) when the totals exceed the limits or the crates form a
cycle, and 0 otherwise, printing the totals. --json writes the same data (nodes, edges with
symbols, floors, circles, upward edges, totals) as JSON (`-` for stdout, instead of the text).
--root selects the workspace (default: the repository holding this script), so it runs on
any worktree: `python3 scripts/layers.py --root /work/wt-ftl --crate ftl`.
Standard library only (Python 3.11+ for tomllib; older versions fall back to a small reader).
"""

import argparse
import bisect
import json
import os
import re
import sys

try:
    import tomllib  # Python 3.11+
except ImportError:  # pragma: no cover
    tomllib = None

ROOT = "crate"  # name of the crate-root node (lib.rs / main.rs)


# --------------------------------------------------------------------------------------------
# Step 1: blank comments and literals
# --------------------------------------------------------------------------------------------

def _is_ident_char(c):
    return c.isalnum() or c == "_"


def _blank(chars, a, b):
    """Replace chars[a:b] by spaces, keeping newlines (so positions and lines stay the same)."""
    for k in range(a, b):
        if chars[k] != "\n":
            chars[k] = " "


def sanitize(text):
    """Return `text` with comments and string/char literals blanked (same length and lines)."""
    chars = list(text)
    n = len(text)
    i = 0
    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            _blank(chars, i, j)
            i = j
            continue
        if c == "/" and nxt == "*":
            depth = 1
            j = i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth += 1
                    j += 2
                elif text.startswith("*/", j):
                    depth -= 1
                    j += 2
                else:
                    j += 1
            _blank(chars, i, j)
            i = j
            continue
        # raw strings: r"..", r#".."#, br#".."#, cr"..": `r` not inside an identifier
        if c == "r" and (i == 0 or not _is_ident_char(text[i - 1])
                         or (text[i - 1] in "bc" and (i < 2 or not _is_ident_char(text[i - 2])))):
            j = i + 1
            while j < n and text[j] == "#":
                j += 1
            if j < n and text[j] == '"':
                hashes = j - i - 1
                close = '"' + "#" * hashes
                k = text.find(close, j + 1)
                k = n if k < 0 else k + len(close)
                _blank(chars, i, k)
                i = k
                continue
        if c == '"':
            j = i + 1
            while j < n:
                if text[j] == "\\":
                    j += 2
                    continue
                if text[j] == '"':
                    j += 1
                    break
                j += 1
            _blank(chars, i, j)
            i = j
            continue
        if c == "'":
            # char literal ('x', '\n', '\u{..}', '{') or a lifetime / label ('a)
            if nxt == "\\":
                j = text.find("'", i + 3)
                j = n if j < 0 else j + 1
                _blank(chars, i, j)
                i = j
                continue
            if i + 2 < n and text[i + 2] == "'":
                _blank(chars, i, i + 3)
                i += 3
                continue
            i += 1
            continue
        i += 1
    return "".join(chars)


# --------------------------------------------------------------------------------------------
# Step 2: blank test-only code
# --------------------------------------------------------------------------------------------

_CFG_TEST = re.compile(r"#\s*\[\s*cfg\s*\(\s*(?:test|all\s*\([^()]*\btest\b[^()]*\))\s*\)\s*\]")
_INNER_CFG_TEST = re.compile(r"#\s*!\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]")
_ITEM_START = re.compile(
    r"(?:pub\s*(?:\([^)]*\))?\s*)?(?:(?:const|async|unsafe|extern\s*(?:\"[^\"]*\")?|default)\s+)*"
    r"(fn|struct|enum|union|impl|mod|trait|type|const|static|use|macro_rules|extern)\b")
_PUB_IN = re.compile(r"\bpub\s*\(\s*in\s+[^)]*\)")
_CLOSERS = {")": "(", "]": "[", "}": "{"}


def _skip_ws(s, i):
    while i < len(s) and s[i].isspace():
        i += 1
    return i


def _match_bracket(s, i):
    """s[i] is an opening bracket; return the index just past its match."""
    depth = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def _item_end(s, i):
    """End (exclusive) of the item/statement/field starting at s[i]."""
    n = len(s)
    m = _ITEM_START.match(s, i)
    is_item = m is not None
    depth = 0
    j = i
    while j < n:
        c = s[j]
        if c in "([":
            depth += 1
        elif c == "{":
            if depth == 0 and is_item:
                return _match_bracket(s, j)
            depth += 1
        elif c in ")]}":
            if depth == 0:
                return j  # closes the enclosing block: the statement/field ended before it
            depth -= 1
        elif c == ";" and depth == 0:
            return j + 1
        elif c == "," and depth == 0 and not is_item:
            return j + 1
        j += 1
    return n


def strip_test_code(s):
    """Blank everything that is compiled only under cfg(test).

    Returns (text, test_only_mods, whole_file_is_test)."""
    if _INNER_CFG_TEST.search(s):
        return re.sub(r"[^\n]", " ", s), set(), True
    chars = list(s)
    test_mods = set()
    pos = 0
    while True:
        m = _CFG_TEST.search(s, pos)
        if not m:
            break
        start = m.start()
        j = _skip_ws(s, m.end())
        while j < len(s) and s[j] == "#":  # further attributes on the same item
            k = _skip_ws(s, j + 1)
            if k < len(s) and s[k] == "[":
                j = _skip_ws(s, _match_bracket(s, k))
            else:
                break
        end = _item_end(s, j)
        mm = re.match(r"(?:pub\s*(?:\([^)]*\))?\s*)?mod\s+(?:r#)?(\w+)\s*;", s[j:end])
        if mm:
            test_mods.add(mm.group(1))
        _blank(chars, start, end)
        pos = max(end, m.end())
    out = "".join(chars)
    out = _PUB_IN.sub(lambda mo: re.sub(r"[^\n]", " ", mo.group(0)), out)
    return out, test_mods, False


# --------------------------------------------------------------------------------------------
# Step 3: parse `use` trees, definitions and paths
# --------------------------------------------------------------------------------------------

_USE = re.compile(r"(?<![\w$.:])use\s")
_PUB_BEFORE = re.compile(r"(?<![\w$])pub\s*(?:\([^)]*\))?\s*$")
_USE_TOKEN = re.compile(r"\s*(::|\{|\}|,|\*|\$?(?:r#)?[A-Za-z_]\w*)")
_DEF = re.compile(r"(?<![\w$])(fn|struct|enum|union|trait|type|const|static|mod)\s+(?:r#)?([A-Za-z_]\w*)"
                  r"|macro_rules\s*!\s*([A-Za-z_]\w*)")
_MOD_DECL = re.compile(r"(?<![\w$])mod\s+(?:r#)?([A-Za-z_]\w*)\s*([;{])")
_PATH_START = re.compile(r"(?<![\w$:])(\$crate|crate|super|self|[a-z_][a-z0-9_]*)\s*::")
_SEG = re.compile(r"\s*::\s*((?:r#)?[A-Za-z_]\w*)")


def _depths_at(s, positions):
    """Brace depth ({ } only) at each of the sorted positions."""
    res = []
    depth = 0
    k = 0
    for idx in positions:
        while k < idx:
            c = s[k]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
            k += 1
        res.append(depth)
    return res


def parse_use_tree(body):
    """Parse the text between `use` and `;`.

    Returns a list of (segments, name_or_None, is_glob): `name` is what the leaf is called in
    scope (its alias or last segment); `segments` is the full path (with `self` leaves
    folded into their parent path)."""
    toks = [t for t in _USE_TOKEN.findall(body)]
    leaves = []
    pos = 0

    def tree(prefix):
        nonlocal pos
        path = list(prefix)
        if pos < len(toks) and toks[pos] == "::":  # leading :: (extern crate)
            path.append("::")
            pos += 1
        while pos < len(toks):
            t = toks[pos]
            if t == "{":
                pos += 1
                while pos < len(toks) and toks[pos] != "}":
                    if toks[pos] == ",":
                        pos += 1
                        continue
                    tree(path)
                pos += 1  # skip }
                return
            if t == "*":
                pos += 1
                leaves.append((path, None, True))
                return
            if t in (",", "}"):
                break
            # identifier
            pos += 1
            if t == "self" and path:  # `a::{self}` names a itself
                name = path[-1]
                seg_path = list(path)
            else:
                seg_path = path + [t]
                name = t
            if pos < len(toks) and toks[pos] == "::":
                pos += 1
                path = seg_path
                continue
            if pos + 1 < len(toks) and toks[pos] == "as":
                name = toks[pos + 1]
                pos += 2
            leaves.append((seg_path, name, False))
            return

    while pos < len(toks):
        before = pos
        tree([])
        if pos < len(toks) and toks[pos] == ",":
            pos += 1
        if pos == before:
            pos += 1
    return leaves


def _outside(s, spans):
    """The text of s with the given spans blanked."""
    parts = []
    last = 0
    for a, b in spans:
        if a > last:
            parts.append(s[last:a])
        parts.append(" ")
        last = max(last, b)
    parts.append(s[last:])
    return "".join(parts)


def _used_in(name, text):
    """Whether the file's own code (use declarations blanked) uses `name`.

    A Capitalized or UPPER_CASE name (type, trait, const) counts wherever it stands as a word,
    except after `.`; a lowercase name (function, module, macro) only when called, as in
    `name(`, `name!` or `name::` (so `mod name;`, a method `.name(`, a field or variable
    `name` and a `fn name` definition of a method do not count)."""
    if name[:1].isupper():
        return re.search(r"(?<![\w$.:])" + re.escape(name) + r"(?!\w)", text) is not None
    for m in re.finditer(r"(?<![\w$.:])" + re.escape(name) + r"\s*(?:\(|!|::)", text):
        if not re.search(r"\bfn\s+$", text[max(0, m.start() - 20):m.start()]):
            return True
    return False


class FileInfo:
    def __init__(self, mod, path, rel):
        self.mod = mod          # tuple of module segments; () is the crate root
        self.path = path        # absolute file path
        self.rel = rel          # path relative to the crate directory
        self.text = ""
        self.clean = ""
        self.newlines = []
        self.defs = set()       # names of items defined at the top level of the file
        self.uses = []          # (segments, name, is_glob, line, start, end)
        self.pub_uses = set()   # indices into uses of `pub use` (re-export) leaves
        self.decl_mods = set()  # `mod x;` declared here (file children)
        self.inline_mods = set()
        self.test_mods = set()
        self.test_file = False
        self.scope = {}         # name -> module tuple (modules usable as `name::...`)

    def line_of(self, pos):
        return bisect.bisect_right(self.newlines, pos) + 1

    @property
    def is_mod_rs(self):
        return os.path.basename(self.path) in ("mod.rs", "lib.rs", "main.rs")


def module_of(rel_src):
    """Module path (tuple) of a file path relative to src/."""
    parts = rel_src[:-3].split(os.sep)
    if parts == ["lib"] or parts == ["main"]:
        return ()
    if parts[-1] == "mod":
        parts = parts[:-1]
    return tuple(parts)


def mod_name(mod):
    return "::".join(mod) if mod else ROOT


# --------------------------------------------------------------------------------------------
# A crate: nodes, resolution, edges
# --------------------------------------------------------------------------------------------

class Crate:
    def __init__(self, name, directory):
        self.name = name
        self.dir = directory
        self.files = {}        # module tuple -> FileInfo
        self.notes = []
        self.edges = {}        # (from, to) -> list of (symbol, line)
        self._load()
        self._resolve_all()

    # ---- loading
    def _load(self):
        src = os.path.join(self.dir, "src")
        found = []
        for dirpath, dirnames, filenames in os.walk(src):
            dirnames.sort()
            rel_dir = os.path.relpath(dirpath, src)
            if rel_dir == "bin" or rel_dir.startswith("bin" + os.sep):
                continue
            for f in sorted(filenames):
                if f.endswith(".rs"):
                    rel = os.path.normpath(os.path.join(rel_dir, f))
                    found.append(rel)
        has_lib = "lib.rs" in found
        for rel in found:
            if rel == "main.rs" and has_lib:
                self.notes.append("src/main.rs left out (a separate binary target next to lib.rs)")
                continue
            mod = module_of(rel)
            if mod in self.files:
                self.notes.append("two files for module %s; using %s" % (mod_name(mod), self.files[mod].rel))
                continue
            fi = FileInfo(mod, os.path.join(src, rel), os.path.join("src", rel))
            with open(fi.path, encoding="utf-8") as fh:
                fi.text = fh.read()
            fi.clean, fi.test_mods, fi.test_file = strip_test_code(sanitize(fi.text))
            fi.newlines = [m.start() for m in re.finditer("\n", fi.text)]
            self.files[mod] = fi
        # test-only modules: declared under #[cfg(test)] (with their sub-modules), or #![cfg(test)]
        drop = set()
        for mod, fi in self.files.items():
            if fi.test_file:
                drop.add(mod)
            for t in fi.test_mods:
                drop.add(mod + (t,))
        for mod in list(self.files):
            if any(mod[:len(d)] == d for d in drop):
                self.notes.append("%s is test-only; left out" % self.files[mod].rel)
                del self.files[mod]
        for fi in self.files.values():
            self._parse_file(fi)
        declared = {fi.mod + (m,) for fi in self.files.values() for m in fi.decl_mods}
        for mod, fi in sorted(self.files.items()):
            if mod and mod not in declared:
                self.notes.append("%s has no `mod` declaration in its parent" % fi.rel)

    def _parse_file(self, fi):
        s = fi.clean
        # use declarations
        for m in _USE.finditer(s):
            end = s.find(";", m.end())
            end = len(s) if end < 0 else end
            body = s[m.end():end]
            if "{" in body and body.count("{") != body.count("}"):
                continue  # not a use declaration after all
            is_pub = _PUB_BEFORE.search(s, max(0, m.start() - 40), m.start()) is not None
            for segs, name, glob in parse_use_tree(body):
                if segs and segs[0] != "::":
                    fi.uses.append((segs, name, glob, fi.line_of(m.start()), m.start(), end + 1))
                    if is_pub:
                        fi.pub_uses.add(len(fi.uses) - 1)
        # top-level definitions and module declarations
        defs = list(_DEF.finditer(s))
        depths = _depths_at(s, [m.start() for m in defs])
        for m, d in zip(defs, depths):
            if d != 0:
                continue
            name = m.group(2) or m.group(3)
            if name and name != "_":
                fi.defs.add(name)
        decls = list(_MOD_DECL.finditer(s))
        depths = _depths_at(s, [m.start() for m in decls])
        for m, d in zip(decls, depths):
            if d != 0:
                continue
            if m.group(2) == ";":
                fi.decl_mods.add(m.group(1))
            else:
                fi.inline_mods.add(m.group(1))

    # ---- resolution
    def _start(self, fi, first, scope=None):
        """Module that the first segment of a path stands for, or None (external / not a module)."""
        if first in ("crate", "$crate"):
            return ()
        if first == "self":
            return fi.mod
        if first == "super":
            return fi.mod[:-1] if fi.mod else None
        sc = fi.scope if scope is None else scope
        return sc.get(first)

    def _walk(self, fi, segs, scope=None):
        """Resolve a path to (module, rest-of-segments), or None when it is not ours."""
        if not segs:
            return None
        cur = self._start(fi, segs[0], scope)
        if cur is None:
            return None
        i = 1
        if segs[0] == "super":
            while i < len(segs) and segs[i] == "super":
                if not cur:
                    return None
                cur = cur[:-1]
                i += 1
        while i < len(segs):
            seg = segs[i]
            if seg == "self":
                i += 1
                continue
            if cur + (seg,) in self.files:
                cur = cur + (seg,)
                i += 1
            else:
                break
        if cur not in self.files:
            return None
        return cur, segs[i:]

    def _follow(self, mod, name, seen=None):
        """Where `name`, seen as an item of module `mod`, really lives (re-exports followed)."""
        seen = set() if seen is None else seen
        if (mod, name) in seen or len(seen) > 20:
            return mod, name
        seen.add((mod, name))
        fi = self.files[mod]
        if name in fi.defs or name in fi.inline_mods:
            return mod, name
        for segs, alias, glob, _line, _a, _b in fi.uses:
            if glob or alias != name:
                continue
            r = self._walk(fi, segs)
            if r is None:
                return mod, name  # re-exported from another crate: stays here
            tmod, rest = r
            if not rest:
                return tmod, None  # the name is a module
            return self._follow(tmod, rest[0], seen)
        for segs, _alias, glob, _line, _a, _b in fi.uses:
            if not glob:
                continue
            r = self._walk(fi, segs)
            if r is None or r[1]:
                continue
            gmod = r[0]
            gfi = self.files[gmod]
            if name in gfi.defs or name in gfi.inline_mods or any(
                    a == name and not g for _s, a, g, _l, _x, _y in gfi.uses):
                return self._follow(gmod, name, seen)
        return mod, name

    def resolve(self, fi, segs, scope=None):
        """(target module, symbol) for a path used in file `fi`, or None when it is not ours."""
        r = self._walk(fi, segs, scope)
        if r is None:
            return None
        mod, rest = r
        if not rest:
            return mod, (mod[-1] if mod else ROOT)
        sym = rest[0]
        tmod, tsym = self._follow(mod, sym)
        return tmod, (tsym or sym)

    def _build_scopes(self):
        # child modules (files) and inline modules
        for mod, fi in self.files.items():
            sc = {}
            for m in fi.inline_mods:
                sc[m] = mod
            for other in self.files:
                if len(other) == len(mod) + 1 and other[:len(mod)] == mod:
                    sc[other[-1]] = other
            fi.scope = sc
        # names brought in by `use` (two passes, so `use a; use a::b;` resolves) and by globs
        for _ in range(2):
            for fi in self.files.values():
                sc = dict(fi.scope)
                for segs, name, glob, _l, _a, _b in fi.uses:
                    if glob:
                        continue
                    r = self._walk(fi, segs)
                    if r is None:
                        if name:
                            sc.setdefault(name, None)  # another crate's name: not ours
                        continue
                    if not r[1]:
                        sc[name] = r[0]
                for segs, name, glob, _l, _a, _b in fi.uses:
                    if not glob:
                        continue
                    r = self._walk(fi, segs)
                    if r is None or r[1]:
                        continue
                    for k, v in self.files[r[0]].scope.items():
                        sc.setdefault(k, v)
                fi.scope = sc

    def _add_edge(self, src, dst, sym, line):
        if src == dst:
            return
        self.edges.setdefault((src, dst), []).append((sym, line))

    def _resolve_all(self):
        self._build_scopes()
        for mod, fi in sorted(self.files.items()):
            spans = sorted({(u[4], u[5]) for u in fi.uses})
            starts = [a for a, _ in spans]
            outside = _outside(fi.clean, spans)
            for k, (segs, name, glob, line, a, b) in enumerate(fi.uses):
                if k in fi.pub_uses and (glob or not _used_in(name, outside)):
                    continue  # a pure re-export: references through it are followed instead
                r = self._walk(fi, segs)
                if r is None:
                    continue
                tmod, rest = r
                if glob:
                    if rest:  # glob of an enum or type: counts as that item
                        t, sym = self.resolve(fi, segs)
                        self._add_edge(mod, t, sym, line)
                    else:
                        self._add_edge(mod, tmod, "*", line)
                    continue
                t, sym = self.resolve(fi, segs)
                self._add_edge(mod, t, sym, line)
            s = fi.clean
            for m in _PATH_START.finditer(s):
                p = m.start()
                k = bisect.bisect_right(starts, p) - 1
                if k >= 0 and spans[k][0] <= p < spans[k][1]:
                    continue  # inside a use declaration (already read)
                first = m.group(1)
                if first not in ("crate", "$crate", "super", "self") and first not in fi.scope:
                    continue
                segs = [first]
                q = m.end() - 2  # back onto the `::`
                while True:
                    mm = _SEG.match(s, q)
                    if not mm:
                        break
                    segs.append(mm.group(1))
                    q = mm.end()
                r = self.resolve(fi, segs)
                if r is None:
                    continue
                self._add_edge(mod, r[0], r[1], fi.line_of(p))

    # ---- graph views
    def nodes(self):
        return sorted(self.files)

    def succ(self):
        g = {n: set() for n in self.files}
        for (a, b) in self.edges:
            g[a].add(b)
        return g


# --------------------------------------------------------------------------------------------
# Graph algorithms
# --------------------------------------------------------------------------------------------

def tarjan(nodes, succ):
    """Strongly connected components (iterative Tarjan), each a sorted list."""
    index = {}
    low = {}
    on_stack = set()
    stack = []
    comps = []
    counter = [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(succ[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(succ[w]))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(sorted(comp))
    return comps


def els_order(nodes, edges):
    """Eades-Lin-Smyth greedy order (sources first). Ties are broken by sorted node order."""
    remaining = set(nodes)
    out = {n: set() for n in nodes}
    inn = {n: set() for n in nodes}
    for a, b in edges:
        out[a].add(b)
        inn[b].add(a)
    s1, s2 = [], []

    def remove(n):
        remaining.discard(n)
        for b in out[n]:
            inn[b].discard(n)
        for a in inn[n]:
            out[a].discard(n)

    while remaining:
        progress = True
        while progress:
            progress = False
            sinks = sorted(n for n in remaining if not out[n])
            for n in sinks:
                if n in remaining and not out[n]:
                    s2.insert(0, n)
                    remove(n)
                    progress = True
            sources = sorted(n for n in remaining if not inn[n])
            for n in sources:
                if n in remaining and not inn[n]:
                    s1.append(n)
                    remove(n)
                    progress = True
        if remaining:
            best = min(sorted(remaining), key=lambda n: -(len(out[n]) - len(inn[n])))
            s1.append(best)
            remove(best)
    return s1 + s2


def _reaches(succ, src, dst):
    seen = {src}
    todo = [src]
    while todo:
        v = todo.pop()
        if v == dst:
            return True
        for w in succ.get(v, ()):
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return False


def _back_count(order, edges):
    pos = {n: i for i, n in enumerate(order)}
    return sum(1 for a, b in edges if pos[a] > pos[b])


def sift(order, edges):
    """Local improvement of a linear order: move single nodes to the position that leaves the
    fewest backward edges, while that strictly helps (nodes tried in sorted order)."""
    order = list(order)
    out = {n: set() for n in order}
    inn = {n: set() for n in order}
    for a, b in edges:
        out[a].add(b)
        inn[b].add(a)
    improved = True
    while improved:
        improved = False
        for n in sorted(order):
            rest = [x for x in order if x != n]
            best_k, best_cost = None, None
            for k in range(len(rest) + 1):
                above, below = set(rest[:k]), set(rest[k:])
                # n at position k: backward if n -> earlier node, or later node -> n
                cost = len(out[n] & above) + len(inn[n] & below)
                if best_cost is None or cost < best_cost:
                    best_k, best_cost = k, cost
            cur = order.index(n)
            above, below = set(order[:cur]), set(order[cur + 1:])
            if best_cost < len(out[n] & above) + len(inn[n] & below):
                order = rest[:best_k] + [n] + rest[best_k:]
                improved = True
    return order


def feedback_arcs(nodes, edges):
    """A small feedback arc set of the subgraph: the backward edges of the Eades-Lin-Smyth
    order (improved by sifting single nodes), pruned to a minimal set."""
    order = sift(els_order(nodes, edges), edges)
    pos = {n: i for i, n in enumerate(order)}
    back = sorted(e for e in edges if pos[e[0]] > pos[e[1]])
    kept = {n: set() for n in nodes}
    for a, b in edges:
        if pos[a] < pos[b]:
            kept[a].add(b)
    fas = []
    for a, b in back:
        if _reaches(kept, b, a):
            fas.append((a, b))
        else:
            kept[a].add(b)
    return fas, order


def floors_of(nodes, succ):
    """Floors of the condensation DAG: list of lists of components (each a sorted list)."""
    comps = tarjan(nodes, succ)
    comp_of = {}
    for i, c in enumerate(comps):
        for n in c:
            comp_of[n] = i
    floor = {}
    # Tarjan emits components in reverse topological order: sinks first
    for i, c in enumerate(comps):
        f = 0
        for n in c:
            for w in succ[n]:
                j = comp_of[w]
                if j != i:
                    f = max(f, floor[j] + 1)
        floor[i] = f
    top = max(floor.values()) if floor else -1
    floors = [[] for _ in range(top + 1)]
    for i, c in enumerate(comps):
        floors[floor[i]].append(c)
    for fl in floors:
        fl.sort(key=lambda c: (len(c) == 1, c))
    return floors, comps


# --------------------------------------------------------------------------------------------
# Workspace and crate dependencies
# --------------------------------------------------------------------------------------------

def _read_toml(path):
    with open(path, "rb") as fh:
        data = fh.read()
    if tomllib is not None:
        return tomllib.loads(data.decode("utf-8"))
    return _mini_toml(data.decode("utf-8"))


def _mini_toml(text):  # pragma: no cover - only without tomllib
    """Just enough TOML for members, package.name and [dependencies] tables."""
    res = {}
    cur = res
    text = re.sub(r"#[^\n\"]*", "", text)
    for m in re.finditer(r"^\s*\[([^\]]+)\]\s*$|^\s*([\w.\-\"]+)\s*=\s*(.+?)\s*$", text, re.M | re.S):
        if m.group(1):
            cur = res
            for k in m.group(1).strip().split("."):
                cur = cur.setdefault(k.strip('"'), {})
            continue
        key, val = m.group(2), m.group(3)
        parts = key.split(".")
        tgt = cur
        for k in parts[:-1]:
            tgt = tgt.setdefault(k, {})
        v = val.strip()
        if v.startswith("["):
            tgt[parts[-1]] = re.findall(r'"([^"]*)"', v)
        elif v.startswith("{"):
            d = {}
            for k2, v2 in re.findall(r'(\w+)\s*=\s*("[^"]*"|true|false|\[[^\]]*\])', v):
                d[k2] = v2.strip('"') if v2.startswith('"') else (v2 == "true")
            tgt[parts[-1]] = d
        elif v in ("true", "false"):
            tgt[parts[-1]] = v == "true"
        else:
            tgt[parts[-1]] = v.strip('"')
    return res


def load_workspace(root):
    ws = _read_toml(os.path.join(root, "Cargo.toml"))
    members = ws.get("workspace", {}).get("members", [])
    wdeps = ws.get("workspace", {}).get("dependencies", {})
    crates = []  # (name, dir, [dep names])
    by_dir = {}
    for mem in members:
        d = os.path.normpath(os.path.join(root, mem))
        ct = _read_toml(os.path.join(d, "Cargo.toml"))
        name = ct.get("package", {}).get("name", os.path.basename(d))
        by_dir[d] = name
        crates.append((name, d, ct.get("dependencies", {})))
    result = []
    for name, d, deps in crates:
        local = []
        for key, spec in sorted(deps.items()):
            if not isinstance(spec, dict):
                continue
            path = None
            if "path" in spec:
                path = os.path.normpath(os.path.join(d, spec["path"]))
            elif spec.get("workspace"):
                w = wdeps.get(key)
                if isinstance(w, dict) and "path" in w:
                    path = os.path.normpath(os.path.join(root, w["path"]))
            if path is not None:
                local.append(by_dir.get(path, spec.get("package", key)))
        result.append((name, d, sorted(set(local))))
    return result


# --------------------------------------------------------------------------------------------
# Analysis and report
# --------------------------------------------------------------------------------------------

def analyze_crate(crate):
    nodes = crate.nodes()
    succ = crate.succ()
    floors, comps = floors_of(nodes, succ)
    circles = sorted((c for c in comps if len(c) > 1), key=lambda c: (-len(c), c))
    upward = []
    for c in circles:
        cs = set(c)
        sub = [e for e in crate.edges if e[0] in cs and e[1] in cs]
        fas, _order = feedback_arcs(c, sub)
        upward.extend(fas)
    upward.sort()
    return {"floors": floors, "circles": circles, "upward": upward}


def _syms(refs):
    seen = []
    for sym, _line in refs:
        if sym not in seen:
            seen.append(sym)
    return sorted(seen)


def crate_json(crate, an):
    n = mod_name
    return {
        "name": crate.name,
        "dir": crate.dir,
        "nodes": [{"module": n(m), "file": crate.files[m].rel} for m in crate.nodes()],
        "edges": [{"from": n(a), "to": n(b), "symbols": _syms(refs),
                   "refs": [{"symbol": s, "line": l} for s, l in refs]}
                  for (a, b), refs in sorted(crate.edges.items())],
        "floors": [[[n(m) for m in c] for c in fl] for fl in an["floors"]],
        "circles": [[n(m) for m in c] for c in an["circles"]],
        "upward": [{"from": n(a), "to": n(b), "symbols": _syms(crate.edges[(a, b)])}
                   for a, b in an["upward"]],
        "totals": {"files": len(crate.files), "edges": len(crate.edges),
                   "circles": len(an["circles"]),
                   "circle_files": sum(len(c) for c in an["circles"]),
                   "upward": len(an["upward"])},
        "notes": crate.notes,
    }


def crate_floors(crates):
    names = [c[0] for c in crates]
    succ = {c[0]: set(d for d in c[2] if d in names) for c in crates}
    floors, comps = floors_of(sorted(names), succ)
    cycles = [c for c in comps if len(c) > 1]
    return floors, cycles, succ


def _wrap(prefix, items, width=100):
    lines = []
    cur = prefix
    indent = " " * len(prefix)
    for k, it in enumerate(items):
        piece = it + ("," if k < len(items) - 1 else "")
        if len(cur) + len(piece) + 1 > width and cur.strip() and cur != prefix:
            lines.append(cur.rstrip())
            cur = indent
        cur += piece + " "
    lines.append(cur.rstrip())
    return lines


def text_report(root, ws_floors, ws_cycles, ws_succ, results, totals):
    out = []
    out.append("layers of %s" % root)
    out.append("")
    out.append("crates ([dependencies] on workspace crates), floors bottom-up:")
    for i, fl in enumerate(ws_floors):
        out.extend(_wrap("  floor %d: " % i, [("{%s}" % ", ".join(c)) if len(c) > 1 else c[0] for c in fl]))
    out.append("  crate cycles: %s" % ("none" if not ws_cycles else
                                        "; ".join("{%s}" % ", ".join(c) for c in ws_cycles)))
    for crate, an in results:
        n = mod_name
        out.append("")
        out.append("== %s: %d files, %d import edges, %d floors" % (
            crate.name, len(crate.files), len(crate.edges), len(an["floors"])))
        for i, fl in enumerate(an["floors"]):
            out.extend(_wrap("  floor %d: " % i,
                             [("{%s}" % ", ".join(n(m) for m in c)) if len(c) > 1 else n(c[0]) for c in fl]))
        if an["circles"]:
            out.append("  circles (%d, %d files):" % (len(an["circles"]), sum(len(c) for c in an["circles"])))
            for k, c in enumerate(an["circles"], 1):
                out.extend(_wrap("    #%d (%d files): " % (k, len(c)), [n(m) for m in c]))
        else:
            out.append("  circles: none")
        if an["upward"]:
            out.append("  upward imports (%d):" % len(an["upward"]))
            for a, b in an["upward"]:
                out.append("    %s: %s -> %s (%s)" % (crate.name, n(a), n(b), ", ".join(_syms(crate.edges[(a, b)]))))
        for note in crate.notes:
            out.append("  note: %s" % note)
    out.append("")
    out.append(totals_line(totals))
    return "\n".join(out)


def totals_line(t):
    return "circles: %d (files: %d), upward imports: %d" % (t["circles"], t["circle_files"], t["upward"])


def default_root():
    here = os.path.dirname(os.path.abspath(__file__))
    d = here
    while True:
        if os.path.exists(os.path.join(d, "Cargo.toml")) and os.path.exists(os.path.join(d, ".git")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return os.path.dirname(here)
        d = parent


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Draw and check the import layers of the workspace's crates and modules.")
    ap.add_argument("--root", default=None, help="workspace directory (default: this repository)")
    ap.add_argument("--crate", dest="crate", default=None, help="report only this crate")
    ap.add_argument("--json", default=None, metavar="FILE", help="write the data as JSON ('-': stdout)")
    ap.add_argument("--check", action="store_true", help="exit 1 when the totals exceed the limits")
    ap.add_argument("--max-circles", type=int, default=0, help="with --check (default 0)")
    ap.add_argument("--max-upward", type=int, default=0, help="with --check (default 0)")
    args = ap.parse_args(argv)

    root = os.path.abspath(args.root or default_root())
    ws = load_workspace(root)
    names = [c[0] for c in ws]
    if args.crate and args.crate not in names:
        print("layers: no crate %r in %s (crates: %s)" % (args.crate, root, ", ".join(names)), file=sys.stderr)
        return 2
    ws_floors, ws_cycles, ws_succ = crate_floors(ws)
    order = [name for fl in ws_floors for c in fl for name in c]
    dirs = {c[0]: c[1] for c in ws}
    results = []
    for name in order:
        if args.crate and name != args.crate:
            continue
        crate = Crate(name, dirs[name])
        results.append((crate, analyze_crate(crate)))
    totals = {
        "circles": sum(len(an["circles"]) for _c, an in results),
        "circle_files": sum(len(c) for _c, an in results for c in an["circles"]),
        "upward": sum(len(an["upward"]) for _c, an in results),
        "crate_cycles": len(ws_cycles),
    }

    if args.json:
        data = {
            "root": root,
            "crates": {
                "deps": {k: sorted(v) for k, v in sorted(ws_succ.items())},
                "floors": ws_floors,
                "cycles": ws_cycles,
            },
            "modules": {c.name: crate_json(c, an) for c, an in results},
            "totals": totals,
        }
        text = json.dumps(data, indent=1)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as fh:
                fh.write(text + "\n")

    if args.check:
        problems = []
        if totals["circles"] > args.max_circles:
            problems.append("%d import circles (limit %d)" % (totals["circles"], args.max_circles))
        if totals["upward"] > args.max_upward:
            problems.append("%d upward imports (limit %d)" % (totals["upward"], args.max_upward))
        if ws_cycles:
            problems.append("crate cycle: " + "; ".join("{%s}" % ", ".join(c) for c in ws_cycles))
        if args.json != "-":
            print(totals_line(totals))
        if problems:
            print("layers: FAIL: " + "; ".join(problems), file=sys.stderr)
            for crate, an in results:
                for c in an["circles"]:
                    print("  circle in %s: {%s}" % (crate.name, ", ".join(mod_name(m) for m in c)), file=sys.stderr)
                for a, b in an["upward"]:
                    print("  upward: %s: %s -> %s (%s)" % (crate.name, mod_name(a), mod_name(b),
                                                            ", ".join(_syms(crate.edges[(a, b)]))), file=sys.stderr)
            return 1
        return 0

    if args.json != "-":
        print(text_report(root, ws_floors, ws_cycles, ws_succ, results, totals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
