#!/usr/bin/env python3
"""Tests of scripts/layers.py on a tiny fake workspace (run: python3 scripts/test_layers.py)."""

import contextlib
import io
import json
import os
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layers  # noqa: E402

FILES = {
    "Cargo.toml": """
        [workspace]
        members = ["crates/base", "crates/app"]

        [workspace.dependencies]
        base = { path = "crates/base" }
        serde = "1"
    """,
    "crates/base/Cargo.toml": """
        [package]
        name = "base"

        [dependencies]
        serde.workspace = true
    """,
    "crates/base/src/lib.rs": """
        //! A crate whose modules x -> y -> z -> x form a circle.
        pub mod grp;
        pub mod v;
        pub mod w;
        pub mod x;
        pub mod y;
        pub mod z;

        pub use w::Widget;

        /// Defined here: `crate::Root` is an edge to the root.
        pub struct Root;
    """,
    "crates/base/src/x.rs": """
        use crate::y::Y;
        pub struct X(pub Y);
    """,
    "crates/base/src/y.rs": """
        use crate::{z::Z};
        pub struct Y(pub Z);
        // crate::w::Widget in a comment does not count
        pub fn label() -> &'static str {
            let _brace = '{';
            "crate::v::nothing { in a string"
        }
    """,
    "crates/base/src/z.rs": """
        use super::{x::X, Root};
        pub struct Z;
        pub fn make() -> Option<X> {
            let _ = Root;
            None
        }
    """,
    "crates/base/src/w.rs": """
        pub struct Widget;

        #[cfg(test)]
        mod tests {
            use crate::x::X;
            const S: &str = r#"} still a string {"#;
            #[test]
            fn t() { let _: Option<X> = None; }
        }
    """,
    "crates/base/src/v.rs": """
        pub fn f() -> usize {
            let _w = crate::Widget;
            crate::grp::Thing::size()
        }
    """,
    "crates/base/src/grp/mod.rs": """
        mod inner;
        pub use inner::Thing;
    """,
    "crates/base/src/grp/inner.rs": """
        pub struct Thing;
        impl Thing { pub fn size() -> usize { 0 } }
    """,
    "crates/app/Cargo.toml": """
        [package]
        name = "app"

        [dependencies]
        base.workspace = true
    """,
    "crates/app/src/main.rs": """
        mod run;
        fn main() { run::go(); }
    """,
    "crates/app/src/run.rs": """
        pub fn go() { let _ = base::Root; }
    """,
}


class LayersTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        root = cls.tmp.name
        for rel, text in FILES.items():
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as fh:
                fh.write(textwrap.dedent(text).lstrip())
        cls.root = root

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_main(self, *args):
        out = io.StringIO()
        err = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = layers.main(["--root", self.root, *args])
        return code, out.getvalue(), err.getvalue()

    def data(self):
        code, out, _ = self.run_main("--json", "-")
        self.assertEqual(code, 0)
        return json.loads(out)

    def test_edges(self):
        base = self.data()["modules"]["base"]
        edges = {(e["from"], e["to"]): e["symbols"] for e in base["edges"]}
        self.assertEqual(edges, {
            ("x", "y"): ["Y"],
            ("y", "z"): ["Z"],            # use crate::{z::Z}
            ("z", "x"): ["X"],            # use super::{x::X, ..}
            ("z", "crate"): ["Root"],     # defined in lib.rs: edge to the root
            ("v", "w"): ["Widget"],       # crate::Widget through lib.rs's `pub use w::Widget`
            ("v", "grp::inner"): ["Thing"],  # crate::grp::Thing through grp/mod.rs's `pub use`
        })
        # not there: w -> x (only in #[cfg(test)] mod tests), y -> v / y -> w (string, comment),
        # crate -> w and grp -> grp::inner (pure re-exports), any `mod x;` declaration

    def test_circle_and_upward(self):
        data = self.data()
        base = data["modules"]["base"]
        self.assertEqual(base["circles"], [["x", "y", "z"]])
        self.assertEqual(len(base["upward"]), 1)
        up = base["upward"][0]
        self.assertIn((up["from"], up["to"]), {("x", "y"), ("y", "z"), ("z", "x")})
        self.assertEqual(data["totals"]["circles"], 1)
        self.assertEqual(data["totals"]["circle_files"], 3)
        self.assertEqual(data["totals"]["upward"], 1)
        # floors: the circle is one floor above the root it imports; v above w and grp::inner
        floors = base["floors"]
        self.assertIn(["x", "y", "z"], floors[1])
        self.assertIn(["crate"], floors[0])

    def test_crates(self):
        data = self.data()
        self.assertEqual(data["crates"]["deps"], {"app": ["base"], "base": []})
        self.assertEqual(data["crates"]["floors"], [[["base"]], [["app"]]])
        self.assertEqual(data["crates"]["cycles"], [])
        app = data["modules"]["app"]
        self.assertEqual([(e["from"], e["to"]) for e in app["edges"]], [("crate", "run")])
        self.assertEqual(app["circles"], [])

    def test_check(self):
        code, out, err = self.run_main("--check")
        self.assertEqual(code, 1)
        self.assertIn("circles: 1 (files: 3), upward imports: 1", out)
        self.assertIn("FAIL", err)
        code, out, _ = self.run_main("--check", "--max-circles", "1", "--max-upward", "1")
        self.assertEqual(code, 0)
        code, _, _ = self.run_main("--check", "--crate", "app")
        self.assertEqual(code, 0)

    def test_text_report(self):
        code, out, _ = self.run_main()
        self.assertEqual(code, 0)
        self.assertIn("{x, y, z}", out)
        self.assertIn("upward imports (1):", out)


if __name__ == "__main__":
    unittest.main()
