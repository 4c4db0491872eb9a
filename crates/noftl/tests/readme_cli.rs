//! Every command line the README shows works: each `noftl ...` line of its ```sh blocks parses
//! against the real command-line definition (every variant of its synopsis: each `[...]` group
//! with and without, each alternative of `a|b`), and each line is then run for real at a small
//! scale, in README order in one scratch directory (so `noftl plot out/tpcb` finds what the
//! line before it wrote). How a line is made small, or why it only parses, is in `HOW`, one
//! entry per README line: a new README line without an entry, or an entry whose line is gone,
//! fails the test, so the table cannot drift from the README.
//!
//! The server lines (`serve`, `mount`, `dashboard`) are started, used by the README's own client
//! lines (fio, nbdinfo, fsck) once they say they are ready, and stopped; where a tool or FUSE is
//! missing they are skipped with the reason printed.

mod nbd_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nbd_support::{fuse_available, is_mounted, reap, require};

/// How the test runs one README line.
enum How {
    /// Run it, after replacing each `(from, to)` (which must occur) and appending `append`.
    Small {
        replace: &'static [(&'static str, &'static str)],
        append: &'static str,
    },
    /// Parse only, for this reason.
    ParseOnly(&'static str),
    /// Start it, wait until it is ready, run the README lines starting with `during` (each
    /// made small by `replace`, which applies to them too), stop it, then run those starting
    /// with `after`.
    Server {
        kind: ServerKind,
        replace: &'static [(&'static str, &'static str)],
        during: &'static [&'static str],
        after: &'static [&'static str],
        tools: &'static [&'static str],
    },
    /// Run by a `Server` entry (its client line).
    ClientOf(&'static str),
    /// `noftl vm`: run like `Small` when QEMU and the guest kernel (scripts/vm-kernel.sh) are
    /// there, else skipped with the reason printed.
    Guest {
        replace: &'static [(&'static str, &'static str)],
        append: &'static str,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ServerKind {
    /// Ready when it prints "ready".
    Nbd,
    /// Ready when the mount point appears in /proc/self/mounts.
    Fuse,
    /// Ready when it prints its URL; the test fetches the page.
    Dashboard,
}

const fn small(replace: &'static [(&'static str, &'static str)]) -> How {
    How::Small {
        replace,
        append: "",
    }
}

/// Where the test mounts the README's `/mnt/dfs` (in the scratch directory).
const MOUNT_POINT: &str = "mnt-dfs";

/// A smaller device for the lines that fill one first (`--precondition`).
const SHRINK: &str = " --set geometry.blocks_per_plane=128";

/// One free-space level, two schemes, a short window on a quarter of the default device.
const IAA_SMALL: &str = " --free 30% --schemes conventional,iaa --duration 100ms --warmup 0 \
                         --set geometry.blocks_per_plane=64";

/// One entry per README line, by the line's beginning (unique among the lines).
const HOW: &[(&str, How)] = &[
    ("noftl device presets", small(&[])),
    ("noftl device show --preset", small(&[])),
    ("noftl device show --set", small(&[])),
    (
        "noftl io --target raw --rw write",
        small(&[("--ops 100000", "--ops 2000")]),
    ),
    (
        "noftl io --target dftl --cache",
        How::Small {
            replace: &[("--ops 100000", "--ops 2000")],
            append: SHRINK,
        },
    ),
    (
        "noftl io --target dftl-orig",
        How::Small {
            replace: &[("--ops 20000", "--ops 2000")],
            append: SHRINK,
        },
    ),
    (
        "noftl io --target raw --clock real",
        How::Small {
            replace: &[("--ops 20000", "--ops 200")],
            append: SHRINK,
        },
    ),
    (
        "noftl io --target fast",
        small(&[("--ops 50000", "--ops 2000")]),
    ),
    (
        "noftl io --target page --preset mlc16k",
        small(&[("--ops 50000", "--ops 2000")]),
    ),
    (
        "noftl io --target amf",
        small(&[("--ops 50000", "--ops 2000")]),
    ),
    (
        "noftl io --target page --preset tlc16k",
        small(&[("--ops 50000", "--ops 2000")]),
    ),
    (
        "noftl io --target page --precondition --rw randwrite --distribution",
        How::Small {
            replace: &[("--ops 100000", "--ops 2000")],
            append: SHRINK,
        },
    ),
    (
        "noftl io --job",
        // The job's 256 MiB region needs the default device; the fill of all of it is left out.
        small(&[("--precondition", "")]),
    ),
    ("noftl io --replay", small(&[])),
    ("noftl ftl memory", small(&[])),
    (
        "noftl serve",
        How::Server {
            kind: ServerKind::Nbd,
            replace: &[
                ("/tmp/ssd.sock", "ssd.sock"),
                ("--target page", "--target page --preset tiny"),
                ("--size=64m", "--size=1m"),
            ],
            during: &["fio --ioengine=nbd", "nbdinfo --map"],
            after: &[],
            tools: &["fio", "nbdinfo"],
        },
    ),
    (
        "noftl mount --fs dfs",
        How::Server {
            kind: ServerKind::Fuse,
            replace: &[
                ("/mnt/dfs", MOUNT_POINT),
                ("--clock real", "--preset tiny --clock real"),
            ],
            during: &[],
            after: &["noftl fsck --fs dfs"],
            tools: &["fusermount3"],
        },
    ),
    ("noftl fsck --fs dfs", How::ClientOf("noftl mount --fs dfs")),
    (
        "noftl vm --fs ext4",
        How::Guest {
            // Flags before `--`: what follows is the guest's command.
            replace: &[
                (
                    "--store page",
                    "--store page --preset tiny --set geometry.blocks_per_plane=128 --clock none \
                     --timeout 5m",
                ),
                ("--size=16m", "--size=4m"),
            ],
            append: "",
        },
    ),
    (
        "noftl fs bench",
        How::ParseOnly(
            "its points run fio and the FUSE mounts on the wall clock for minutes; \
             tests/dfs_mount.rs and tests/nbd_fs.rs run its parts",
        ),
    ),
    (
        "noftl bench tpcb --storage native --scale 4",
        small(&[("--scale 4", "--scale 1"), ("--txns 50000", "--txns 500")]),
    ),
    (
        "noftl bench tpcb --storage dftl-orig",
        small(&[
            ("--scale 12", "--scale 1"),
            ("--duration 10s", "--duration 100ms"),
        ]),
    ),
    (
        "noftl bench tpcc",
        How::Small {
            replace: &[("--duration 10s", "--duration 50ms")],
            append: " --items 1000 --customers 300",
        },
    ),
    (
        "noftl bench tpch",
        small(&[("--scale 0.1", "--scale 0.01")]),
    ),
    (
        "noftl bench tatp",
        small(&[
            ("--scale 30000", "--scale 1000"),
            ("--txns 20000", "--txns 500"),
        ]),
    ),
    (
        "noftl crashtest --workload tpcb --storage dftl",
        small(&[("--seeds 200", "--seeds 2")]),
    ),
    (
        "noftl iaa compare --storage page|native",
        How::Small {
            replace: &[],
            append: IAA_SMALL,
        },
    ),
    (
        "noftl iaa ablation",
        How::ParseOnly(
            "the ablation runs eight 20%-free comparisons per store (12-15 minutes each); \
             lab's iaa tests run the paper model's ordering and the steps' specs small",
        ),
    ),
    (
        "noftl ipa compare --paper",
        How::ParseOnly(
            "Table I's regime with three seeds takes about 5 minutes; tests/ipa_cli.rs runs \
             ipa compare small",
        ),
    ),
    (
        "noftl crashtest --workload iaa",
        small(&[("--seeds 100", "--seeds 2")]),
    ),
    (
        "noftl ipa compare [",
        How::Small {
            replace: &[],
            // As tests/ipa_cli.rs: a small device preconditioned to half a device write.
            append: " --preset tiny --set geometry.blocks_per_plane=64 --scale 1500 \
                     --precondition 0.5 --round 1s --duration 2s",
        },
    ),
    (
        "noftl ipa advise",
        How::Small {
            replace: &[],
            append: " --scale 1000 --duration 200ms",
        },
    ),
    (
        "noftl crashtest --workload tpcb --storage native --set",
        small(&[("--seeds 1000", "--seeds 2")]),
    ),
    (
        "noftl crashtest --workload tpcc",
        small(&[("--seeds 100", "--seeds 1")]),
    ),
    (
        "noftl crashtest --storage page --preset tlc16k",
        small(&[("--seeds 200", "--seeds 1")]),
    ),
    (
        "noftl compare --workload tpcb|tpcc|tatp|tpch [",
        How::Small {
            replace: &[],
            append: " --scale 1 --duration 100ms --warmup none --stores native,page",
        },
    ),
    (
        "noftl compare --results out/fig3",
        How::Small {
            replace: &[],
            append: " --scale 1 --duration 100ms --warmup none --stores native,page",
        },
    ),
    (
        "noftl bench tpcb --storage native --duration 10s --results",
        small(&[("--duration 10s", "--duration 300ms")]),
    ),
    (
        "noftl bench tpcb --storage page --duration 10s --results",
        small(&[("--duration 10s", "--duration 300ms")]),
    ),
    (
        "noftl io --target page --precondition --ops 100000 --results",
        How::Small {
            replace: &[("--ops 100000", "--ops 2000")],
            append: SHRINK,
        },
    ),
    (
        "noftl iaa compare --storage native --results",
        How::Small {
            replace: &[],
            // The native store keeps a 512-block log besides the table.
            append: " --free 50% --schemes conventional,iaa --duration 50ms --warmup 0 \
                     --set geometry.blocks_per_plane=160",
        },
    ),
    (
        "noftl reproduce amf",
        How::ParseOnly(
            "ten rows, 48 guest boots under TCG, steady-state rounds: 22 minutes on 2 cores; tests/reproduce_amf_cli.rs runs --quick",
        ),
    ),
    (
        "noftl reproduce dfs",
        How::ParseOnly(
            "four rows, 8 guest boots under TCG: about 5 minutes; tests/reproduce_dfs_cli.rs runs --quick",
        ),
    ),
    (
        "noftl compare --workload tpcc --paper",
        How::ParseOnly("the paper's six TPC-C scales take about 30 minutes"),
    ),
    ("noftl sweep examples/sweeps/waf.toml --jobs", small(&[])),
    (
        "noftl sweep examples/sweeps/waf.toml --executor ray",
        How::ParseOnly(
            "starting a Ray instance takes tens of seconds; tests/sweep_cli.rs runs the Ray \
             executor where ray is installed",
        ),
    ),
    ("noftl sweep merge", small(&[])),
    ("noftl plot sweep-waf", small(&[])),
    ("noftl plot out/fig3", small(&[])),
    ("noftl plot out/tpcb out/tpcb-page", small(&[])),
    ("noftl plot out/tpcb --kind timeseries", small(&[])),
    ("noftl plot docs/results/ipa-tatp.json", small(&[])),
    ("noftl plot docs/results/iaa-native.json", small(&[])),
    (
        "noftl dashboard",
        How::Server {
            kind: ServerKind::Dashboard,
            replace: &[("127.0.0.1:8080", "127.0.0.1:0")],
            during: &[],
            after: &[],
            tools: &[],
        },
    ),
];

/// The sweep plan the README runs, made small in the scratch directory: the same verb and grid
/// shape on a device of 32 blocks per plane written over a few times, two spare factors and
/// policies.
const SMALL_WAF_PLAN: &[(&str, &str)] = &[
    (
        "geometry.blocks_per_plane=512",
        "geometry.blocks_per_plane=32",
    ),
    ("\"4GiB\"", "\"16MiB\""),
    ("[\"page\", \"dftl\"]", "[\"page\"]"),
    (
        "[\"greedy\", \"cost-benefit\", \"fifo\", \"random\"]",
        "[\"greedy\", \"fifo\"]",
    ),
    (
        "[\"5%\", \"7%\", \"10%\", \"15%\", \"20%\", \"28%\", \"35%\"]",
        "[\"10%\", \"28%\"]",
    ),
];

/// What the placeholders of a synopsis stand for when the line is parsed.
const PLACEHOLDERS: &[(&str, &str)] = &[("N", "1"), ("SF", "0.01"), ("K", "2"), ("FILE", "r.json")];

/// A README command line: its text without the trailing comment, and its line number.
struct Line {
    text: String,
    at: usize,
}

/// The command lines of the README's ```sh blocks (comments dropped).
fn readme_lines() -> Vec<Line> {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let mut out = Vec::new();
    let mut in_sh = false;
    for (i, l) in readme.lines().enumerate() {
        let t = l.trim_end();
        if t.starts_with("```") {
            in_sh = t == "```sh" && !in_sh;
            continue;
        }
        let text = strip_comment(t).trim().to_string();
        if in_sh && !text.is_empty() {
            out.push(Line { text, at: i + 1 });
        }
    }
    out
}

/// `line` without a `#` comment outside quotes.
fn strip_comment(line: &str) -> &str {
    let mut quote = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') if i == 0 || line[..i].ends_with(' ') => return &line[..i],
            _ => {}
        }
    }
    line
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Shell words of `s` (single and double quotes; no escapes, none of the lines needs them).
fn words(s: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut quote = None;
    let mut any = false;
    for c in s.chars() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                quoted = true;
                any = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if any {
                    out.push((std::mem::take(&mut cur), quoted));
                }
                quoted = false;
                any = false;
            }
            (_, c) => {
                cur.push(c);
                any = true;
            }
        }
    }
    assert!(quote.is_none(), "unbalanced quote in {s:?}");
    if any {
        out.push((cur, quoted));
    }
    out
}

/// A synopsis: words, each with its alternatives (`a|b`), and optional groups `[...]`, each
/// with its alternatives (`[x | y]`).
#[derive(Debug)]
enum Node {
    Word(Vec<String>),
    Group(Vec<Vec<Node>>),
}

fn parse_synopsis(s: &str) -> Vec<Node> {
    // Brackets and a spaced bar are tokens of their own; a bar inside a word separates its
    // alternatives.
    let spaced = s.replace('[', " [ ").replace(']', " ] ");
    let toks = words(&spaced);
    let mut pos = 0;
    let (seq, end) = parse_seq(&toks, &mut pos, 0);
    assert!(
        end.is_none() && pos == toks.len(),
        "unbalanced [ ] in {s:?}"
    );
    seq
}

/// Parses until `]`, `|` (inside a group) or the end; returns the sequence and the token that
/// ended it.
fn parse_seq(
    toks: &[(String, bool)],
    pos: &mut usize,
    depth: usize,
) -> (Vec<Node>, Option<String>) {
    let mut seq = Vec::new();
    while *pos < toks.len() {
        let (t, quoted) = &toks[*pos];
        *pos += 1;
        match t.as_str() {
            "[" if !quoted => {
                let mut alts = Vec::new();
                loop {
                    let (alt, end) = parse_seq(toks, pos, depth + 1);
                    alts.push(alt);
                    match end.as_deref() {
                        Some("|") => continue,
                        Some("]") => break,
                        _ => panic!("a [ group is not closed"),
                    }
                }
                seq.push(Node::Group(alts));
            }
            "]" | "|" if !quoted => {
                assert!(depth > 0, "{t} outside a [ ] group");
                return (seq, Some(t.clone()));
            }
            w if !quoted && w.contains('|') => {
                seq.push(Node::Word(w.split('|').map(str::to_string).collect()));
            }
            w => seq.push(Node::Word(vec![w.to_string()])),
        }
    }
    (seq, None)
}

/// How many variants cover every option of `seq` (at group depth `depth`): variant k picks
/// option `(k - depth) % n` of a word at that depth, and a group is absent in the variants
/// before its depth's turn, so each option and each group's absence occur at least once.
fn variants_needed(seq: &[Node], depth: usize) -> usize {
    seq.iter()
        .map(|n| match n {
            Node::Word(alts) => depth + alts.len(),
            Node::Group(alts) => alts
                .iter()
                .map(|a| variants_needed(a, depth + 1).max(depth + 1 + alts.len()))
                .max()
                .unwrap_or(0),
        })
        .max()
        .unwrap_or(1)
}

fn variant(seq: &[Node], k: usize, depth: usize, out: &mut Vec<String>) {
    for n in seq {
        match n {
            Node::Word(alts) => out.push(alts[k.saturating_sub(depth) % alts.len()].clone()),
            Node::Group(alts) if k > depth => {
                variant(&alts[(k - depth - 1) % alts.len()], k, depth + 1, out);
            }
            Node::Group(_) => {}
        }
    }
}

/// Every variant of a synopsis, its placeholders filled in, without repeats.
fn variants(synopsis: &str) -> Vec<Vec<String>> {
    let seq = parse_synopsis(synopsis);
    let mut out: Vec<Vec<String>> = Vec::new();
    for k in 0..variants_needed(&seq, 0) {
        let mut v = Vec::new();
        variant(&seq, k, 0, &mut v);
        let v = v
            .into_iter()
            .map(|w| {
                PLACEHOLDERS
                    .iter()
                    .find(|(p, _)| *p == w)
                    .map_or(w, |(_, x)| (*x).to_string())
            })
            .collect();
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

fn how(line: &Line) -> &'static How {
    let hits: Vec<_> = HOW
        .iter()
        .filter(|(p, _)| line.text.starts_with(p))
        .collect();
    match hits.as_slice() {
        [(_, h)] => h,
        [] => panic!(
            "README.md:{}: `{}` has no entry in readme_cli.rs's HOW: say how to run it small \
             (or why it only parses)",
            line.at, line.text
        ),
        many => panic!(
            "README.md:{}: `{}` matches {} entries of HOW",
            line.at,
            line.text,
            many.len()
        ),
    }
}

fn noftl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_noftl"))
}

/// Checks that `args` (after `noftl`) parse.
fn parses(args: &[String]) -> Result<(), String> {
    let out = noftl()
        .args(args)
        .env("NOFTL_PARSE_ONLY", "1")
        .output()
        .expect("run noftl");
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// `text` made small: each replacement must apply.
fn shrink(text: &str, replace: &[(&str, &str)], append: &str) -> String {
    let mut t = text.to_string();
    for (from, to) in replace {
        assert!(
            t.contains(from),
            "`{text}`: its HOW entry replaces {from:?}, which it lacks"
        );
        t = t.replace(from, to);
    }
    t + append
}

/// A process the test started, killed if the test fails while it runs.
struct Started(Child);

impl Drop for Started {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

impl Started {
    fn interrupt(&mut self) -> std::process::ExitStatus {
        // SAFETY: kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(self.0.id() as i32, libc::SIGINT) };
        assert_eq!(rc, 0, "SIGINT to {}", self.0.id());
        reap(&mut self.0, Duration::from_secs(30)).expect("the server stops on SIGINT")
    }
}

/// Runs one command line (the first variant of its synopsis) in `dir`, which must succeed
/// within the limit.
fn run_line(dir: &Path, text: &str) {
    let t0 = Instant::now();
    let argv = &variants(text)[0];
    let (prog, args) = argv.split_first().expect("a command");
    let mut cmd = if prog == "noftl" {
        noftl()
    } else {
        Command::new(prog)
    };
    let child = cmd
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("`{text}`: cannot start: {e}"));
    let mut child = Started(child);
    let status = reap(&mut child.0, Duration::from_secs(300));
    let mut err = String::new();
    if let Some(mut e) = child.0.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let status = status.unwrap_or_else(|| panic!("`{text}` still runs after 300 s"));
    assert!(status.success(), "`{text}` failed ({status}):\n{err}");
    eprintln!(
        "ran   {:5.1} s  {}",
        t0.elapsed().as_secs_f64(),
        argv.join(" ")
    );
}

/// The client lines of a server entry, made small.
fn clients(lines: &[Line], prefixes: &[&str], replace: &[(&str, &str)]) -> Vec<String> {
    prefixes
        .iter()
        .map(|p| {
            let l = lines
                .iter()
                .find(|l| l.text.starts_with(p))
                .unwrap_or_else(|| panic!("no README line starts with {p:?}"));
            let applicable: Vec<_> = replace
                .iter()
                .filter(|(f, _)| l.text.contains(f))
                .copied()
                .collect();
            shrink(&l.text, &applicable, "")
        })
        .collect()
}

/// Starts a server line, waits until it is ready, runs its clients and stops it.
#[allow(clippy::too_many_arguments)]
fn run_server(
    dir: &Path,
    lines: &[Line],
    line: &Line,
    kind: ServerKind,
    replace: &[(&str, &str)],
    during: &[&str],
    after: &[&str],
    tools: &[&str],
) {
    let available = match kind {
        ServerKind::Fuse => fuse_available(tools),
        _ => require(tools),
    };
    if let Err(why) = available {
        eprintln!("SKIPPED `{}` and its clients: {why}", line.text);
        return;
    }
    let applicable: Vec<_> = replace
        .iter()
        .filter(|(f, _)| line.text.contains(f))
        .copied()
        .collect();
    let text = shrink(&line.text, &applicable, "");
    // The fullest variant: every optional group given (the dashboard's port 0, not 8080).
    let argv = variants(&text).pop().expect("a variant");
    let mnt = dir.join(MOUNT_POINT);
    if kind == ServerKind::Fuse {
        std::fs::create_dir_all(&mnt).expect("the mount point");
    }
    let mut cmd = noftl();
    cmd.args(&argv[1..])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SIGINT at its default, whatever this test inherited: a shell without job control starts
    // background commands (`./scripts/test &`) with SIGINT ignored, which a server without a
    // handler of its own (the dashboard) would inherit and then outlive the SIGINT below.
    // SAFETY: signal(2) is async-signal-safe, and nothing else runs between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = Started(cmd.spawn().expect("start the server"));
    // Servers announce readiness on either stream (serve: standard error; dashboard: output).
    let (tx, rx) = mpsc::channel();
    let out: Box<dyn Read + Send> = Box::new(child.0.stdout.take().expect("stdout"));
    let err: Box<dyn Read + Send> = Box::new(child.0.stderr.take().expect("stderr"));
    for stream in [out, err] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(stream).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut url = None;
    loop {
        assert!(Instant::now() < deadline, "`{text}` not ready after 30 s");
        if kind == ServerKind::Fuse && is_mounted(&mnt) {
            break;
        }
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(50)) {
            eprintln!("  | {l}");
            if kind == ServerKind::Nbd && l.contains("ready") {
                break;
            }
            if kind == ServerKind::Dashboard {
                if let Some(u) = l.split_whitespace().find(|w| w.starts_with("http://")) {
                    url = Some(u.to_string());
                    break;
                }
            }
        }
    }
    eprintln!("ready        {}", argv.join(" "));
    if let Some(u) = url {
        let page = http_get(&u);
        assert!(page.starts_with("HTTP/1.1 200"), "GET {u}: {page:.200}");
    }
    if kind == ServerKind::Fuse {
        std::fs::write(mnt.join("hello.txt"), b"hello from the README test\n").expect("write");
        assert_eq!(
            std::fs::read(mnt.join("hello.txt")).expect("read back"),
            b"hello from the README test\n"
        );
    }
    for c in clients(lines, during, replace) {
        run_line(dir, &c);
    }
    let status = child.interrupt();
    // The dashboard has no handler of its own: SIGINT ends it as it ends any program.
    let by_sigint = kind == ServerKind::Dashboard
        && std::os::unix::process::ExitStatusExt::signal(&status) == Some(libc::SIGINT);
    assert!(
        status.success() || by_sigint,
        "`{text}` exited with {status} on SIGINT"
    );
    for c in clients(lines, after, replace) {
        run_line(dir, &c);
    }
}

/// A plain HTTP GET of `url` (`http://HOST:PORT/PATH`): the response's head and body.
fn http_get(url: &str) -> String {
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut s = std::net::TcpStream::connect(host).expect("connect to the dashboard");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(
        s,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// The scratch directory: the README's relative inputs (docs/results, examples/fio and traces,
/// the sweep plan, made small) where its lines expect them.
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let d = dir.path();
    std::fs::create_dir_all(d.join("docs")).expect("docs");
    std::os::unix::fs::symlink(repo().join("docs/results"), d.join("docs/results"))
        .expect("docs/results");
    std::fs::create_dir_all(d.join("examples/sweeps")).expect("examples/sweeps");
    for ex in ["examples/fio", "examples/traces"] {
        std::os::unix::fs::symlink(repo().join(ex), d.join(ex)).expect(ex);
    }
    let plan = std::fs::read_to_string(repo().join("examples/sweeps/waf.toml")).expect("waf.toml");
    std::fs::write(
        d.join("examples/sweeps/waf.toml"),
        shrink(&plan, SMALL_WAF_PLAN, ""),
    )
    .expect("the small plan");
    dir
}

/// QEMU and the guest kernel of `noftl vm` (the kernel cache is filled by
/// scripts/install-test-deps.sh, which `require` runs when a tool is missing).
fn guest_available() -> Result<(), String> {
    require(&["qemu-system-x86_64", "fio"])?;
    lab::experiments::vm::guest::find_kernel()
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[test]
fn every_readme_command_line_parses() {
    let lines = readme_lines();
    let noftl_lines: Vec<_> = lines
        .iter()
        .filter(|l| l.text.starts_with("noftl "))
        .collect();
    assert!(
        noftl_lines.len() > 40,
        "found only {} noftl lines",
        noftl_lines.len()
    );
    let mut failures = Vec::new();
    let mut checked = 0;
    for l in &noftl_lines {
        if let How::ClientOf(server) = how(l) {
            assert!(
                HOW.iter()
                    .any(|(p, h)| p == server && matches!(h, How::Server { .. })),
                "`{}` is the client of {server:?}, which is no server entry of HOW",
                l.text
            );
        }
        for v in variants(&l.text) {
            checked += 1;
            if let Err(e) = parses(&v[1..]) {
                failures.push(format!("README.md:{}: `{}`:\n{e}", l.at, v.join(" ")));
            }
        }
    }
    for (prefix, _) in HOW {
        assert!(
            noftl_lines.iter().any(|l| l.text.starts_with(prefix)),
            "HOW has an entry for {prefix:?}, which no README line starts with any more"
        );
    }
    eprintln!("{checked} variants of {} lines parse", noftl_lines.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_readme_command_line_runs_at_a_small_scale() {
    let lines = readme_lines();
    let dir = scratch();
    let t0 = Instant::now();
    for l in lines.iter().filter(|l| l.text.starts_with("noftl ")) {
        match how(l) {
            How::Small { replace, append } => {
                run_line(dir.path(), &shrink(&l.text, replace, append))
            }
            How::ParseOnly(why) => eprintln!("parsed only  {}: {why}", l.text),
            How::ClientOf(_) => {}
            How::Guest { replace, append } => match guest_available() {
                Ok(()) => run_line(dir.path(), &shrink(&l.text, replace, append)),
                Err(why) => eprintln!("SKIPPED      {}: {why}", l.text),
            },
            How::Server {
                kind,
                replace,
                during,
                after,
                tools,
            } => run_server(dir.path(), &lines, l, *kind, replace, during, after, tools),
        }
    }
    eprintln!("all README lines in {:.1} s", t0.elapsed().as_secs_f64());
}

#[test]
fn synopsis_notation_expands_to_every_option() {
    let v = variants("noftl x --a p|q [--b 1|2|3] [--c N | --d]");
    let all: Vec<String> = v.iter().map(|w| w.join(" ")).collect();
    for want in [
        "noftl x --a p",
        "noftl x --a q --b 1 --c 1",
        "noftl x --a p --b 2 --d",
        "noftl x --a q --b 3 --c 1",
    ] {
        assert!(all.iter().any(|a| a == want), "{want} not in {all:#?}");
    }
    assert_eq!(words("a 'b c' \"d|e\"")[1].0, "b c");
    assert_eq!(strip_comment("noftl io   # a comment"), "noftl io   ");
}
