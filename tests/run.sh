#!/bin/bash
# Runs the unit tests, the fuzz harnesses briefly (when FUZZ_DIR names their binaries), then every
# tests/t[0-9]*.sh as root and again as an unprivileged uid.
# Usage: tests/run.sh path/to/sbx path/to/unit      (TESTS="t0500 t0510" for a subset)
# The last line is the only total: "N passed, N failed, N skipped".
set -u
sbx_bin=$(realpath "${1:?usage: tests/run.sh SBX UNIT}")
unit_bin=$(realpath "${2:?usage: tests/run.sh SBX UNIT}")
src=$(cd "$(dirname "$0")" && pwd)
TEST_UID=${TEST_UID:-4242}

passed=0
failed=0
skipped=0

# a world-readable copy of the binary, the tests and what they read from the repository (man
# pages, completions, the README), so an unprivileged uid can run them from a checkout it cannot
# enter; SBX_SRC points the tests at this copy
work=$(mktemp -d /tmp/sbx-run.XXXXXX)
chmod 755 "$work"
wait_pid=
trap '[ -z "$wait_pid" ] || kill "$wait_pid" 2>/dev/null; subids_restore; tun_restore; btrfs_unmount; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
cp "$sbx_bin" "$work/sbx"
cp -r "$src" "$work/tests"
for f in man completions README.md; do
	[ -e "$src/../$f" ] && cp -r "$src/../$f" "$work/$f"
done
chmod -R a+rX "$work"
SBX_SRC=$work

count() { # parses "# NAME: X ok, Y not ok, Z skipped" from a log
	local line
	line=$(grep -E '^# [^ ]+: [0-9]+ ok, [0-9]+ not ok' "$1" | tail -n 1)
	if [ -z "$line" ]; then
		echo "# $2: no summary line (crashed or timed out)"
		failed=$((failed + 1))
		return
	fi
	# a shell error of the file itself (not of a test body, whose output is indented with #):
	# a broken quote makes the tests after it vanish, not fail
	if grep -Eq '^[^#].*\.sh: line [0-9]+: ' "$1"; then
		echo "# $2: the file itself printed a shell error:"
		grep -E '^[^#].*\.sh: line [0-9]+: ' "$1" | sed 's/^/#   /'
		failed=$((failed + 1))
	fi
	# shellcheck disable=SC2086 # split on purpose
	set -- $line
	passed=$((passed + $3))
	failed=$((failed + $5))
	skipped=$((skipped + ${8:-0}))
}

echo "# unit tests"
log=$(mktemp)
if "$unit_bin" >"$log" 2>&1; then :; fi
cat "$log"
count "$log" unit
rm -f "$log"

# the libFuzzer harnesses, when given (make test sets FUZZ_DIR): each runs once, for
# FUZZ_SMOKE_SECONDS, and counts as one test
if [ -n "${FUZZ_DIR:-}" ]; then
	echo "# fuzz harnesses, ${FUZZ_SMOKE_SECONDS:-3} s each"
	n=0
	for f in "$FUZZ_DIR"/fuzz_*; do
		case $f in *.d) continue ;; esac
		{ [ -f "$f" ] && [ -x "$f" ]; } || continue
		n=$((n + 1))
		if "$src/fuzz/run.sh" "${FUZZ_SMOKE_SECONDS:-3}" "$f"; then
			passed=$((passed + 1))
		else
			failed=$((failed + 1))
		fi
	done
	if [ "$n" -eq 0 ]; then
		echo "not ok - no fuzz harness in $FUZZ_DIR"
		failed=$((failed + 1))
	fi
fi

# runs one file as one user into a log of its own: its output, then how long it took
run_to_log() { # log file label [setpriv args]
	local log=$1 t=$2 label=$3 t0=$SECONDS
	shift 3
	echo "# --- $(basename "$t") as $label" >"$log"
	if [ $# -gt 0 ]; then
		(cd /tmp && timeout -k 10 600 setpriv "$@" env SBX="$work/sbx" SBX_SRC="$SBX_SRC" TEST_USER_LABEL="$label" \
			SBX_TEST_BTRFS="${SBX_TEST_BTRFS:-}" \
			ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
			bash "$t") >>"$log" 2>&1
	else
		(cd /tmp && SBX="$work/sbx" SBX_SRC="$SBX_SRC" TEST_USER_LABEL="$label" timeout -k 10 600 bash "$t") >>"$log" 2>&1
	fi
	echo "# $(basename "$t") as $label took $((SECONDS - t0)) s" >>"$log"
}

report() { # log label
	cat "$1"
	count "$1" "$2"
	rm -f "$1"
}

# A file with the line '# run.sh: subordinate ids for the uid pass' has, for its pass as
# TEST_UID, a range of subordinate ids (SUBID_BASE, 65536 of them) in /etc/subuid (by uid) and
# /etc/subgid (by name), and an entry in /etc/passwd when the uid has none (newuidmap and
# newgidmap serve only a user of the passwd database); the three files are restored exactly
# afterwards (content, owner, mode), also when the pass fails or run.sh is interrupted.
SUBID_BASE=300000
subid_saved=
subids_grant() {
	local f name
	subid_saved=$(mktemp -d /tmp/sbx-subids.XXXXXX) || return 1
	for f in passwd subuid subgid; do
		if [ -e "/etc/$f" ]; then
			cp -p "/etc/$f" "$subid_saved/$f" || return 1
		else
			: >"$subid_saved/$f.absent"
		fi
	done
	name=$(getent passwd "$TEST_UID" | cut -d: -f1)
	if [ -z "$name" ]; then
		name=sbx-test-$TEST_UID
		echo "$name:x:$TEST_UID:$TEST_UID:sbx tests:/nonexistent:/usr/sbin/nologin" >>/etc/passwd
	fi
	echo "$TEST_UID:$SUBID_BASE:65536" >>/etc/subuid
	echo "$name:$SUBID_BASE:65536" >>/etc/subgid
}
subids_restore() {
	local f
	[ -n "$subid_saved" ] || return 0
	for f in passwd subuid subgid; do
		if [ -e "$subid_saved/$f.absent" ]; then
			rm -f "/etc/$f"
		elif [ -e "$subid_saved/$f" ]; then
			# into the same file: its inode, owner and mode stay
			cat "$subid_saved/$f" >"/etc/$f"
		fi
	done
	rm -rf "$subid_saved"
	subid_saved=
}

# A file with the line '# run.sh: /dev/net/tun for the uid pass' has, for its pass as TEST_UID,
# read and write on /dev/net/tun (which slirp4netns opens: rootless Podman's network) when that
# uid has not: an entry for it in the device's ACL, as a Debian host (whose udev makes the device
# 0666) has it for every user. The ACL is restored exactly afterwards (from getfacl's copy), also
# when the pass fails or run.sh is interrupted. Without the device the file says why it skips.
TUN_DEV=/dev/net/tun
tun_saved=
tun_grant() {
	[ -c "$TUN_DEV" ] || return 0
	# shellcheck disable=SC2016 # $1 is the inner shell's
	setpriv --reuid="$TEST_UID" --regid="$TEST_UID" --clear-groups \
		sh -c 'test -r "$1" && test -w "$1"' sh "$TUN_DEV" && return 0
	command -v setfacl >/dev/null || return 1
	tun_saved=$(mktemp /tmp/sbx-tun.XXXXXX) || return 1
	if ! getfacl -p "$TUN_DEV" >"$tun_saved" 2>/dev/null ||
		! setfacl -m "u:$TEST_UID:rw" "$TUN_DEV"; then
		rm -f "$tun_saved"
		tun_saved=
		return 1
	fi
}
tun_restore() {
	[ -n "$tun_saved" ] || return 0
	setfacl --restore="$tun_saved" || setfacl -b "$TUN_DEV"
	rm -f "$tun_saved"
	tun_saved=
}

# A file with the line '# run.sh: a btrfs filesystem for both passes' gets, in both its passes,
# SBX_TEST_BTRFS: the path of an empty btrfs on a loop device (mode 1777), mounted by run.sh
# as root (no test can mount one as another uid) and unmounted after the file's second pass,
# also when it fails or run.sh is interrupted. Without root or mkfs.btrfs it is empty: the file
# says why it skips.
btrfs_mounted=
btrfs_mount() {
	export SBX_TEST_BTRFS=
	[ "$(id -u)" -eq 0 ] && command -v mkfs.btrfs >/dev/null && [ -e /dev/loop-control ] || return 0
	mkdir -p "$work/btrfs" &&
		truncate -s 3G "$work/btrfs.img" &&
		mkfs.btrfs -q "$work/btrfs.img" >/dev/null &&
		mount -o loop "$work/btrfs.img" "$work/btrfs" || return 1
	btrfs_mounted=$work/btrfs
	chmod 1777 "$work/btrfs"
	SBX_TEST_BTRFS=$work/btrfs
}
btrfs_unmount() {
	[ -n "$btrfs_mounted" ] || return 0
	umount "$btrfs_mounted" || umount -l "$btrfs_mounted"
	rm -f "$work/btrfs.img"
	btrfs_mounted=
	SBX_TEST_BTRFS=
}

new_log() { local l; l=$(mktemp); chmod 644 "$l"; echo "$l"; }

# run_passes FILE: runs the file's passes (root, then the uid; or the caller's uid alone) into
# logs, and prints what to report, in order: "LOG<TAB>LABEL" lines, "SKIP<TAB>WHY" and
# "FAIL<TAB>WHY" (counted by the caller, which may be another process)
run_passes() {
	local t=$1 name a b
	name=$(basename "$t")
	if grep -qx '# run.sh: a btrfs filesystem for both passes' "$t" && ! btrfs_mount; then
		printf 'FAIL\t# %s: cannot mount a btrfs filesystem for it\n' "$name"
		btrfs_unmount
		return
	fi
	if [ "$(id -u)" -eq 0 ]; then
		as_uid=(--reuid="$TEST_UID" --regid="$TEST_UID" --clear-groups --reset-env)
		a=$(new_log) b=$(new_log)
		# a file that waits on servers more than it works (a line in it says so) has its two
		# passes run at the same time
		if grep -qx '# run.sh: both passes at once' "$t"; then
			# (waits on these two alone: the waiting lane is a child of the same shell)
			local pa pb
			run_to_log "$a" "$t" root &
			pa=$!
			run_to_log "$b" "$t" "uid $TEST_UID" "${as_uid[@]}" &
			pb=$!
			wait "$pa" "$pb"
		else
			run_to_log "$a" "$t" root
			if grep -qx '# run.sh: subordinate ids for the uid pass' "$t"; then
				if ! subids_grant; then
					printf 'FAIL\t# %s: cannot grant uid %s subordinate ids\n' "$name" "$TEST_UID"
				fi
			fi
			if grep -qx '# run.sh: /dev/net/tun for the uid pass' "$t" && ! tun_grant; then
				printf 'FAIL\t# %s: cannot grant uid %s %s\n' "$name" "$TEST_UID" "$TUN_DEV"
			fi
			run_to_log "$b" "$t" "uid $TEST_UID" "${as_uid[@]}"
			subids_restore
			tun_restore
		fi
		printf '%s\t%s\n' "$a" "$name as root" "$b" "$name as uid $TEST_UID"
	else
		a=$(new_log)
		run_to_log "$a" "$t" "uid $(id -u)"
		printf '%s\t%s\n' "$a" "$name as uid $(id -u)"
		printf 'SKIP\t# %s: second pass as another uid skipped (needs root to switch users)\n' "$name"
	fi
	btrfs_unmount
}

# reports what run_passes printed (in the file named)
report_passes() {
	local log label
	while IFS=$'\t' read -r log label; do
		case $log in
		SKIP) echo "$label" && skipped=$((skipped + 1)) ;;
		FAIL) echo "$label" && failed=$((failed + 1)) ;;
		*) report "$log" "$label" ;;
		esac
	done <"$1"
	rm -f "$1"
}

# The files to run, in two lanes. A file with the line '# run.sh: in the waiting lane' spends its
# time waiting on servers it started (fakes, SDKs over npm, engines, ssh) more than working: the
# waiting lane runs those one after another beside the main lane, on the same machine, and
# their reports follow the main lane's. Such a file touches nothing outside its trash and
# processes of its own (no subordinate ids, no btrfs: those stay in the main lane); its second
# pass runs as TEST_UID + 1.
main_lane=()
wait_lane=()
for t in "$work"/tests/t[0-9]*.sh; do
	[ -f "$t" ] || continue
	# TESTS="t0500 t0510" runs only the files whose names start so
	if [ -n "${TESTS:-}" ]; then
		case " $TESTS " in *" $(basename "$t" | cut -c1-5) "*) ;; *) continue ;; esac
	fi
	if grep -qx '# run.sh: in the waiting lane' "$t" &&
		! grep -qxE '# run.sh: (subordinate ids for the uid pass|a btrfs filesystem for both passes)' "$t"; then
		wait_lane+=("$t")
	else
		main_lane+=("$t")
	fi
done

wait_manifest=$(new_log)
if [ ${#wait_lane[@]} -gt 0 ]; then
	# its unprivileged passes run as the next uid: the subordinate ids the main lane grants and
	# takes back for TEST_UID never change what the waiting lane's sandboxes map
	(TEST_UID=$((TEST_UID + 1)) &&
		for t in "${wait_lane[@]}"; do run_passes "$t"; done >"$wait_manifest") &
	wait_pid=$!
fi
for t in "${main_lane[@]}"; do
	m=$(new_log)
	run_passes "$t" >"$m"
	report_passes "$m"
done
if [ -n "$wait_pid" ]; then
	wait "$wait_pid"
	echo "# the waiting lane"
	report_passes "$wait_manifest"
else
	rm -f "$wait_manifest"
fi

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
