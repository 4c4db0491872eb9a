#!/usr/bin/env bash
# Fetches Debian's kernel and builds the small initramfs `noftl vm` boots in QEMU, into a cache
# directory (docs/nbd.md, "Kernel file systems in a guest"). Idempotent: when the cache holds a
# kernel and an initramfs built by this version of the script, it does nothing.
#
# The cache: $NOFTL_VM_CACHE, else $XDG_CACHE_HOME/noftl/vm, else ~/.cache/noftl/vm. It holds
#   vmlinuz           Debian's kernel (linux-image-amd64's versioned package)
#   initramfs.cpio.gz busybox (static, from busybox-static), the kernel modules below with
#                     their dependencies (modules.dep), and /init
#   kernel-version    e.g. 6.1.0-56-amd64
#   stamp             the checksum of this script: a changed script rebuilds the initramfs
#
# The kernel is not installed: `apt-get install linux-image-amd64` would pull udev and a
# systemd upgrade onto the host. Its package is downloaded (`apt-get download`, no root
# needed) and unpacked with `dpkg-deb -x`; so is busybox-static when /bin/busybox is not a
# static binary.
#
# The guest's /init mounts the host's root read-only over 9p (tag hostroot) and a job
# directory read-write (tag job), runs /job/run.sh (written by `noftl vm`), and powers off.
#
# Exits 0 with a message when it cannot fetch (no apt-get, no network): `noftl vm` then names
# this script, and its tests skip.
set -euo pipefail

CACHE="${NOFTL_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/noftl/vm}"
STAMP="$(sha256sum "$0" | cut -d' ' -f1)"

if [ -f "$CACHE/vmlinuz" ] && [ -f "$CACHE/initramfs.cpio.gz" ] && [ -f "$CACHE/kernel-version" ] &&
   [ "$(cat "$CACHE/stamp" 2>/dev/null)" = "$STAMP" ]; then
  echo "vm-kernel: cached in $CACHE (kernel $(cat "$CACHE/kernel-version"))"
  exit 0
fi

for tool in apt-get apt-cache dpkg-deb gzip sha256sum; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "vm-kernel: no $tool: cannot fetch Debian's kernel; noftl vm and its tests will skip" >&2
    exit 0
  fi
done

# The modules the guest loads at boot (their dependencies come along): the virtio disk and the
# 9p shares, the file systems under test, and the checksums their metadata needs (crc32c for
# ext4 and xfs, crc32 for f2fs; asked for through the crypto API, which would otherwise call
# modprobe at mount time; the generic ones: TCG's default CPU has no SSE4.2 for crc32c-intel).
MODULES=(virtio_pci virtio_blk 9pnet_virtio 9p crc32c_generic crc32_generic ext4 f2fs xfs)

mkdir -p "$CACHE"
WORK="$(mktemp -d "$CACHE/build.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

# linux-image-amd64 is a metapackage; the kernel is in the versioned package it depends on.
PKG="$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')"
if [ -z "$PKG" ]; then
  echo "vm-kernel: apt knows no linux-image-amd64 (apt-get update?); noftl vm and its tests will skip" >&2
  exit 0
fi
if ! apt-get download -q "$PKG" >/dev/null 2>download.log; then
  echo "vm-kernel: could not download $PKG: $(tail -1 download.log); noftl vm and its tests will skip" >&2
  exit 0
fi
dpkg-deb -x ./"$PKG"_*.deb kernel
VERSION="${PKG#linux-image-}"
MODDIR="kernel/lib/modules/$VERSION"

# A static busybox: the host's if it is one, else unpacked from busybox-static.
BUSYBOX=""
if [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; then
  BUSYBOX=/bin/busybox
else
  if ! apt-get download -q busybox-static >/dev/null 2>download.log; then
    echo "vm-kernel: could not download busybox-static: $(tail -1 download.log); noftl vm and its tests will skip" >&2
    exit 0
  fi
  dpkg-deb -x ./busybox-static_*.deb bb
  BUSYBOX="$WORK/bb/bin/busybox"
fi

# The package ships no modules.dep (its postinst runs depmod); busybox's depmod writes it.
"$BUSYBOX" depmod -b kernel "$VERSION"

# The modules and their dependencies, from modules.dep ("path: dep dep ...").
declare -A WANT=()
for m in "${MODULES[@]}"; do
  line="$(grep -E "/${m}\.ko:" "$MODDIR/modules.dep" || true)"
  if [ -z "$line" ]; then
    # Built into the kernel (or absent): nothing to copy.
    grep -qE "/${m}\.ko\$" "$MODDIR/modules.builtin" 2>/dev/null ||
      echo "vm-kernel: note: module $m not found in $PKG" >&2
    continue
  fi
  for path in ${line/:/}; do WANT[$path]=1; done
done

ROOT="$WORK/root"
mkdir -p "$ROOT"/{bin,sbin,dev,proc,sys,etc,host,job,"lib/modules/$VERSION"}
cp "$BUSYBOX" "$ROOT/bin/busybox"
for applet in $("$BUSYBOX" --list); do
  [ "$applet" = busybox ] || ln -sf busybox "$ROOT/bin/$applet"
done
# The kernel's request_module runs /sbin/modprobe.
ln -sf ../bin/busybox "$ROOT/sbin/modprobe"
for path in "${!WANT[@]}"; do
  mkdir -p "$ROOT/lib/modules/$VERSION/$(dirname "$path")"
  cp "$MODDIR/$path" "$ROOT/lib/modules/$VERSION/$path"
done
"$BUSYBOX" depmod -b "$ROOT" "$VERSION"
printf '%s\n' "${MODULES[@]}" >"$ROOT/etc/noftl-modules"

cat >"$ROOT/init" <<'EOF'
#!/bin/sh
# noftl vm's guest init (scripts/vm-kernel.sh): modules, the two 9p shares, the job, power off.
# Whatever fails, the guest powers off: `noftl vm` reads the job's status file, and a missing
# one is its error, with this console's log.
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /etc/noftl-modules); do
  modprobe "$m" 2>/dev/null || echo "noftl-init: modprobe $m failed"
done
OPTS=trans=virtio,version=9p2000.L,msize=262144
if mount -t 9p -o "$OPTS,ro" hostroot /host && mount -t 9p -o "$OPTS" job /job; then
  sh /job/run.sh
else
  echo "noftl-init: cannot mount the 9p shares (hostroot, job)"
fi
sync
poweroff -f
EOF
chmod +x "$ROOT/init"

(cd "$ROOT" && find . | "$BUSYBOX" cpio -o -H newc 2>/dev/null) | gzip -6 >initramfs.cpio.gz
cp "kernel/boot/vmlinuz-$VERSION" "$CACHE/vmlinuz.new"
mv initramfs.cpio.gz "$CACHE/initramfs.cpio.gz.new"
mv "$CACHE/vmlinuz.new" "$CACHE/vmlinuz"
mv "$CACHE/initramfs.cpio.gz.new" "$CACHE/initramfs.cpio.gz"
echo "$VERSION" >"$CACHE/kernel-version"
echo "$STAMP" >"$CACHE/stamp"
echo "vm-kernel: kernel $VERSION and initramfs in $CACHE"
