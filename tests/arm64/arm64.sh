#!/bin/bash
# arm64 test machinery: an arm64 sysroot unpacked from Debian packages, an
# initramfs with busybox, the cross-built tests and their libraries, and a
# boot of Debian's own arm64 kernel in qemu-system-aarch64 (TCG).
#
#   arm64.sh sysroot            download (cached) and unpack the sysroot
#   arm64.sh run BIN...         boot with these test binaries, run them,
#                               print their results and the summary, exit
#                               with the status the guest reported
#
# The packages are fetched with a private apt state under $B/arm64/apt that
# knows only arm64: the host's dpkg is not told about a foreign architecture
# and nothing is installed, so the host's amd64 packages cannot be disturbed.
# Environment: B (build dir, default build), ARM64_TIMEOUT (seconds the
# guest may run, default 900), ARM64_SMP (guest CPUs, default 2),
# ARM64_CPU (QEMU's -cpu, default max: PAC, BTI, LSE), ARM64_VERBOSE=1
# (every test's result line, not only the synthesis), ARM64_ENV (NAME=value
# words for the kernel command line, which the kernel hands to /init's
# environment and so to the tests: A64_FUZZ=long).
set -euo pipefail

B=${B:-build}
W=$(mkdir -p "$B/arm64" && cd "$B/arm64" && pwd)
APTDIR=$W/apt
DEBS=$W/debs
SYSROOT=$W/sysroot
CROSS=aarch64-linux-gnu

# Headers and link-time files only (their own dependencies are not needed
# for cross-linking).
DEV_PKGS="libc6-dev linux-libc-dev libcrypt-dev libcriterion-dev libelf-dev libdw-dev
	zlib1g-dev liblzma-dev libbz2-dev libzstd-dev"
# Run-time libraries: these and everything they depend on (libstdc++6 for
# the sanitizer run-times, C++ programs and tests).
RUN_PKGS="libc6 libgcc-s1 libstdc++6 libcriterion3 libelf1 libdw1 zlib1g liblzma5 libbz2-1.0 libzstd1"
# The guest's userland and kernel (the metapackage names the current one):
# busybox-static, and busybox linked with libc (unpacked beside the
# sysroot, in $W/busybox-dyn) for the shell, cat and gzip, which are
# dynamically linked on a system: the tool's suites preload the agent
# into them.  Every other applet stays static, as the guest's scripts run
# hundreds of them and a dynamic one costs a load and relocation of libc
# under emulation (tests/arm64/cli_arm64.sh took 71 s instead of 30 with
# every applet dynamic).
GUEST_PKGS="busybox-static busybox"
DYN_APPLETS="sh cat gzip"
KERNEL_META=linux-image-arm64

die() { echo "arm64: $*" >&2; exit 1; }

apt_private() {
	local cmd=$1; shift
	"$cmd" -q -o APT::Architecture=arm64 -o APT::Architectures::=arm64 \
		-o Dir::State::Lists="$APTDIR/lists" \
		-o Dir::State::status="$APTDIR/status" \
		-o Dir::Cache="$APTDIR/cache" \
		-o APT::Sandbox::User=root "$@"
}

# The package index, refreshed when older than a day (by our own stamp:
# apt dates the lists by the mirror's Last-Modified).
apt_index() {
	mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial"
	[ -e "$APTDIR/status" ] || : >"$APTDIR/status"
	if [ -z "$(find "$APTDIR/updated" -mtime -1 2>/dev/null)" ]; then
		apt_private apt-get update >"$W/apt-update.log" 2>&1 &&
			touch "$APTDIR/updated"
	fi
	# apt-get update can succeed having fetched nothing: what counts is
	# an index to work from (a stale one does while the mirror is away).
	[ -n "$(find "$APTDIR/lists" -maxdepth 1 -name '*_Packages*')" ] ||
		die "cannot fetch the arm64 package index (see $W/apt-update.log)"
}

# Names of the packages RUN_PKGS need, recursively (real packages only).
run_closure() {
	apt_private apt-cache depends --recurse --no-recommends --no-suggests \
		--no-conflicts --no-breaks --no-replaces --no-enhances $RUN_PKGS |
		grep -v '^ ' | grep -v '^<' | sort -u
}

kernel_pkg() {
	apt_private apt-cache depends "$KERNEL_META" |
		sed -n 's/^  Depends: \(linux-image-[^ ]*-arm64\)$/\1/p' | head -n 1
}

# Downloads what is not in $DEBS yet, and prints the .deb files of the
# packages named (one apt look-up for all of them).
download() {
	local uris want=() name
	mkdir -p "$DEBS"
	uris=$(apt_private apt-get download --print-uris "$@") ||
		die "cannot resolve $*"
	for name in $(echo "$uris" | awk '{ print $2 }'); do
		[ -s "$DEBS/$name" ] || want+=("${name%%_*}")
	done
	if [ ${#want[@]} -gt 0 ]; then
		echo "arm64: downloading ${want[*]}" >&2
		(cd "$DEBS" && apt_private apt-get download "${want[@]}" >/dev/null) ||
			die "cannot download ${want[*]}"
	fi
	echo "$uris" | awk -v d="$DEBS" '{ print d "/" $2 }' | sort
}

# The sysroot: every package unpacked (not installed) with dpkg -x.  A
# stamp lists the .deb files it was made from, so a new package version
# rebuilds it.
cmd_sysroot() {
	command -v $CROSS-gcc >/dev/null || die "$CROSS-gcc missing (scripts/install-deps.sh --arm64)"
	mkdir -p "$W"
	apt_index
	# Nothing to do while the index is not newer than the sysroot and
	# the packages named are those it was made from.
	local names
	names=$(echo $DEV_PKGS $RUN_PKGS $GUEST_PKGS $KERNEL_META)
	if [ -f "$W/sysroot.stamp" ] && [ "$W/sysroot.stamp" -nt "$APTDIR/updated" ] &&
		[ "$(cat "$W/sysroot.names" 2>/dev/null)" = "$names" ]; then
		return 0
	fi
	local kpkg pkgs
	kpkg=$(kernel_pkg) || true
	[ -n "$kpkg" ] || die "cannot resolve $KERNEL_META"
	pkgs="$DEV_PKGS $(run_closure | tr '\n' ' ') $GUEST_PKGS $kpkg"
	local stamp=$W/sysroot.stamp list deb
	list=$(download $pkgs)
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$list" ]; then
		echo "$names" >"$W/sysroot.names"
		touch "$stamp"
		return 0
	fi
	echo "arm64: unpacking $(echo "$list" | wc -l) packages into $SYSROOT"
	rm -rf "$SYSROOT" "$stamp"
	mkdir -p "$SYSROOT"
	rm -rf "$W/busybox-dyn"
	for deb in $list; do
		case $(basename "$deb") in
		busybox_*) dpkg -x "$deb" "$W/busybox-dyn" ;;
		*) dpkg -x "$deb" "$SYSROOT" ;;
		esac
	done
	# Absolute symlinks (some -dev packages point .so links at /lib/...)
	# must resolve inside the sysroot when the cross linker follows them.
	find "$SYSROOT" -type l -lname '/*' | while read -r l; do
		ln -sfn "$SYSROOT$(readlink "$l")" "$l"
	done
	ls "$SYSROOT"/boot/vmlinuz-* >/dev/null || die "no kernel in $kpkg"
	# The guest needs no module (initramfs, PL011 console and everything
	# the tests touch are built in): 300 MB less on disk.
	rm -rf "$SYSROOT/lib/modules"
	echo "$list" >"$stamp"
	echo "$names" >"$W/sysroot.names"
	# Versions no longer named (a new kernel ABI, security updates) go.
	for deb in "$DEBS"/*.deb; do
		grep -qxF "$deb" "$stamp" || rm -f "$deb"
	done
}

# The shared libraries the binaries need, recursively, as absolute paths:
# the sysroot's, then the cross compiler's own run-time libraries (libasan,
# libubsan), which no arm64 package of the sysroot carries.
CROSS_LIBDIR=/usr/$CROSS/lib
needed_libs() {
	local todo=("$@") seen=" " f lib p d
	while [ ${#todo[@]} -gt 0 ]; do
		f=${todo[0]}; todo=("${todo[@]:1}")
		for lib in $($CROSS-readelf -d "$f" 2>/dev/null |
			sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
			case $seen in *" $lib "*) continue ;; esac
			seen="$seen$lib "
			p=""
			for d in "$SYSROOT/lib/$CROSS" "$SYSROOT/usr/lib/$CROSS" "$CROSS_LIBDIR"; do
				[ -e "$d/$lib" ] && { p="$d/$lib"; break; }
			done
			[ -n "$p" ] || die "$f needs $lib, found neither in the sysroot nor in $CROSS_LIBDIR"
			echo "$p"
			todo+=("$p")
		done
	done
}

# The initramfs: busybox and its applet links, the binaries under /tests
# (or /tests-asan when built in a tests-asan directory), their libraries in
# /usr/lib/aarch64-linux-gnu, and init (tests/arm64/init.sh).
make_initramfs() {
	local root=$W/initramfs out=$W/initramfs.cpio.gz bin lib dir
	rm -rf "$root"
	mkdir -p "$root"/{bin,sbin,tests,tests-asan,proc,sys,dev,tmp,lib,usr/lib/$CROSS}
	cp "$SYSROOT/bin/busybox" "$root/bin/busybox"
	cp "$W/busybox-dyn/bin/busybox" "$root/bin/busybox-dyn"
	for a in mount mkdir echo poweroff sleep date uname grep sed \
		timeout ls head tail wc tr rm mktemp dmesg printf expr; do
		ln -sf busybox "$root/bin/$a"
	done
	for a in $DYN_APPLETS; do
		ln -sf busybox-dyn "$root/bin/$a"
	done
	for bin in "$@"; do
		dir=tests
		case "$(basename "$(dirname "$bin")")" in
		tests-asan) dir=tests-asan ;;
		jl) dir=tests/jl ;;	# objects test_tracepoint loads
		cli) dir=tests/cli ;;	# programs the kprobe tool's suite runs
		examples) dir=examples ;;	# modules for `kprobe load`
		esac
		case "$(basename "$bin")" in
		# the kprobe tool: its agent and audit module beside it
		kprobe | libkprobe-agent.so | libkprobe-audit.so)
			dir=tests/kprobe
			# and at the root: the tool's Criterion suites
			# (/tests/test_cli) take / for their build directory
			ln -sf "$dir/$(basename "$bin")" "$root/"
			;;
		esac
		mkdir -p "$root/$dir"
		cp "$bin" "$root/$dir/"
	done
	for lib in $(needed_libs "$@" "$W/busybox-dyn/bin/busybox" | sort -u); do
		cp -L "$lib" "$root/usr/lib/$CROSS/"
	done
	# libgcc_s is loaded with dlopen() by glibc's backtrace() and by the
	# library's return stubs (their unwind information is registered
	# with it), so no DT_NEEDED names it: as on any system, it is there.
	cp -L "$SYSROOT/lib/$CROSS/libgcc_s.so.1" "$root/usr/lib/$CROSS/"
	# The dynamic loader under the name in PT_INTERP.
	cp -L "$SYSROOT/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1" "$root/lib/"
	cp tests/arm64/init.sh "$root/init"
	chmod 755 "$root/init"
	(cd "$root" && find . | sort | cpio -o -H newc --quiet) | gzip -1 >"$out"
}

# Boots the guest, with its console in $W/console.log; the exit status is
# the one the guest printed, 3 when it printed none (crash, hang, timeout).
cmd_run() {
	[ $# -gt 0 ] || die "run: no test binary"
	command -v qemu-system-aarch64 >/dev/null ||
		die "qemu-system-aarch64 missing (scripts/install-deps.sh --arm64)"
	make_initramfs "$@"
	local kernel log=$W/console.log t0 t1 rc
	kernel=$(ls "$SYSROOT"/boot/vmlinuz-* | head -n 1)
	t0=$(date +%s)
	timeout -k 10 "${ARM64_TIMEOUT:-900}" qemu-system-aarch64 \
		-M virt -cpu "${ARM64_CPU:-max}" -smp "${ARM64_SMP:-2}" -m 2G \
		-accel tcg,thread=multi -nographic -no-reboot -nic none \
		-kernel "$kernel" -initrd "$W/initramfs.cpio.gz" \
		-append "console=ttyAMA0 panic=-1 quiet loglevel=3 rdinit=/init kp.verbose=${ARM64_VERBOSE:-0} ${ARM64_ENV:-}" \
		</dev/null >"$log" 2>&1 || true
	t1=$(date +%s)
	tr -d '\r' <"$log" | sed -n '/^KPROBES-ARM64-BEGIN$/,/^KPROBES-ARM64-END/p' |
		grep -v '^KPROBES-ARM64-' || true
	rc=$(tr -d '\r' <"$log" | sed -n 's/^KPROBES-ARM64-END status=\([0-9]*\)$/\1/p' | tail -n 1)
	echo "arm64: guest boot and run took $((t1 - t0)) s (console: $log)"
	if [ -z "$rc" ]; then
		echo "arm64: the guest reported no status; its console ends with:" >&2
		tr -d '\r' <"$log" | tail -n 30 >&2
		exit 3
	fi
	exit "$rc"
}

case ${1:-} in
sysroot) shift; cmd_sysroot "$@" ;;
run) shift; cmd_run "$@" ;;
*) die "usage: arm64.sh sysroot | run BIN..." ;;
esac
