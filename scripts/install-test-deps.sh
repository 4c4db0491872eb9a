#!/usr/bin/env bash
# Installs the real NBD clients and file-system tools the integration tests of `noftl serve`
# use, when they are missing. Idempotent: each tool is checked with `command -v`; apt-get update
# runs once, and only if something is missing; only the missing Debian packages are installed.
#
#   tool        Debian package   used by
#   fio         fio              tests/nbd_fio.rs (nbd engine, verify), docs/PERFORMANCE.md
#   nbdcopy     libnbd-bin       tests/nbd_clients.rs (copy round trip)
#   nbdinfo     libnbd-bin       tests/nbd_clients.rs (handshake, export info)
#   nbdfuse     libnbd-bin       tests/nbd_fs.rs (the export as a file through FUSE)
#   fusermount3 fuse3            tests/nbd_fs.rs (unmounting)
#   fuse2fs     fuse2fs          tests/nbd_fs.rs (ext4 in userspace, no kernel nbd module)
#   mkfs.ext4   e2fsprogs        tests/nbd_fs.rs
#   e2fsck      e2fsprogs        tests/nbd_fs.rs
#   nbdkit      nbdkit           docs/PERFORMANCE.md (the `memory` plugin for comparison)
#   sqlite3     sqlite3          tests/dfs_mount.rs (PRAGMA integrity_check on a DFS mount)
#   git         git              tests/dfs_mount.rs (init/commit on a DFS mount)
#   postmark    postmark         tests/dfs_mount.rs (`fs waf --postmark real`), docs/PERFORMANCE.md
#   chromium    chromium         tests/dashboard_cli.rs (the dashboard in headless Chromium,
#                                over the DevTools protocol; the system browser, no download)
#               fonts-liberation with chromium, when no Liberation fonts: text in the screenshot
#   qemu-system-x86_64 qemu-system-x86  tests/vm_cli.rs (`noftl vm`: kernel file systems in a guest)
#   mkfs.f2fs   f2fs-tools       tests/vm_cli.rs (run by the guest from the host's root)
#   mkfs.xfs    xfsprogs         tests/vm_cli.rs (likewise)
#
# And the guest kernel of `noftl vm`: scripts/vm-kernel.sh downloads Debian's kernel package
# (not installed) and builds an initramfs into a cache directory, once.
#
# And Python packages, with pip into the repository's virtual environment .venv, each only when
# it is not importable there:
#   ray       tests/sweep_cli.rs (`noftl sweep --executor ray`)
#   pandas    tests/results_python.rs (scripts/results_frames.py: every result CSV as a frame)
#   duckdb    tests/results_python.rs (the same files through DuckDB's CSV reader)
#   fio-plot  tests/fio_cli.rs (fio-plot reads `noftl io`'s fio.json)
#   pytest    crates/pynoftl/tests (the Python package's tests)
#   maturin   builds the Python package noftl (crates/pynoftl) into .venv
#
# Then the Python package noftl itself (crates/pynoftl: `maturin develop --profile pyext`),
# when it is not importable in .venv or a source file of the workspace changed since it was
# built (a stamp in .venv); the time it took is printed.
#
# Installs as root (or with password-less sudo) on Debian/Ubuntu. Without apt-get or root it
# says what it could not install and exits 0: the tests that need a missing tool skip with a
# printed reason (as they do when a tool cannot run, e.g. no /dev/fuse in a container). Exits
# non-zero only if an install it attempted fails.
set -euo pipefail

declare -A PKG=(
  [fio]=fio
  [nbdcopy]=libnbd-bin
  [nbdinfo]=libnbd-bin
  [nbdfuse]=libnbd-bin
  [fusermount3]=fuse3
  [fuse2fs]=fuse2fs
  [mkfs.ext4]=e2fsprogs
  [e2fsck]=e2fsprogs
  [nbdkit]=nbdkit
  [sqlite3]=sqlite3
  [git]=git
  [postmark]=postmark
  [chromium]=chromium
  [qemu-system-x86_64]=qemu-system-x86
  [mkfs.f2fs]=f2fs-tools
  [mkfs.xfs]=xfsprogs
)

missing=()
for tool in "${!PKG[@]}"; do
  if ! command -v "$tool" >/dev/null 2>&1 && ! [ -x "/sbin/$tool" ] && ! [ -x "/usr/sbin/$tool" ]; then
    missing+=("${PKG[$tool]}")
  fi
done

# The browser's fonts are a recommendation of chromium-common, which --no-install-recommends
# skips: without a font the test passes but its screenshot shows no text.
if ! [ -d /usr/share/fonts/truetype/liberation ]; then
  missing+=(fonts-liberation)
fi

# pip package -> the module it installs.
declare -A PY=(
  [ray]=ray
  [pandas]=pandas
  [duckdb]=duckdb
  [fio-plot]=fio_plot
  [pytest]=pytest
  [maturin]=maturin
)

install_python() {
  local root want=()
  root="$(cd "$(dirname "$0")/.." && pwd)"
  for pkg in $(printf '%s\n' "${!PY[@]}" | sort); do
    if ! { [ -x "$root/.venv/bin/python" ] && "$root/.venv/bin/python" -c "import ${PY[$pkg]}" 2>/dev/null; }; then
      want+=("$pkg")
    fi
  done
  [ ${#want[@]} -eq 0 ] && return 0
  if ! command -v python3 >/dev/null 2>&1; then
    echo "install-test-deps: no python3; the tests that need ${want[*]} will skip" >&2
    return 0
  fi
  echo "install-test-deps: installing the Python packages ${want[*]} into .venv"
  if ! { { [ -x "$root/.venv/bin/python" ] || python3 -m venv "$root/.venv"; } &&
         "$root/.venv/bin/pip" install -q "${want[@]}"; }; then
    echo "install-test-deps: could not install ${want[*]}; the tests that need them will skip" >&2
  fi
}
install_python

# The Python package noftl (crates/pynoftl) into .venv, when missing or stale: stale when any
# file of the workspace's sources (crates/, Cargo.toml, Cargo.lock) is newer than the stamp
# written after the last build.
install_pynoftl() {
  local root stamp start
  root="$(cd "$(dirname "$0")/.." && pwd)"
  stamp="$root/.venv/.noftl-python-stamp"
  if ! [ -x "$root/.venv/bin/maturin" ] || ! command -v cargo >/dev/null 2>&1; then
    echo "install-test-deps: no maturin in .venv or no cargo: the Python package noftl is not built; its tests will skip" >&2
    return 0
  fi
  if [ -f "$stamp" ] && "$root/.venv/bin/python" -c "import noftl" 2>/dev/null &&
     [ -z "$(find "$root/crates" "$root/Cargo.toml" "$root/Cargo.lock" -newer "$stamp" \
             \( -name '*.rs' -o -name '*.toml' -o -name '*.py' -o -name Cargo.lock \) \
             -not -path '*/__pycache__/*' -print -quit)" ]; then
    return 0
  fi
  echo "install-test-deps: building the Python package noftl into .venv (maturin develop --profile pyext)"
  start=$(date +%s)
  if (cd "$root/crates/pynoftl" &&
      VIRTUAL_ENV="$root/.venv" PATH="$root/.venv/bin:$PATH" \
        maturin develop --quiet --profile pyext --locked); then
    touch "$stamp"
    echo "install-test-deps: built the Python package noftl in $(( $(date +%s) - start )) s"
  else
    echo "install-test-deps: could not build the Python package noftl (crates/pynoftl)" >&2
    return 1
  fi
}
install_pynoftl

# The guest kernel of `noftl vm` (idempotent: nothing to do once cached; says so and goes on
# when it cannot fetch).
"$(dirname "$0")/vm-kernel.sh" ||
  echo "install-test-deps: scripts/vm-kernel.sh failed; the noftl vm tests will skip" >&2

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-test-deps: all tools present"
  exit 0
fi

# Unique package names, sorted for a stable log line.
mapfile -t pkgs < <(printf '%s\n' "${missing[@]}" | sort -u)

# Without a way to install, the tests run anyway: each test that needs a missing tool skips with
# a printed reason, and this says which tools and why, once, up front.
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-test-deps: missing ${pkgs[*]} and no apt-get to install them: the tests that need them will skip" >&2
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo"; else
    echo "install-test-deps: missing ${pkgs[*]}, not root and no password-less sudo: the tests that need them will skip (run as root to install them)" >&2
    exit 0
  fi
fi

echo "install-test-deps: installing ${pkgs[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
