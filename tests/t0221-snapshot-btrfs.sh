#!/bin/bash
# t0220 again with the store on btrfs: a sandbox's files are a subvolume there, and a snapshot,
# a fork and a restore are each one btrfs snapshot of one, not a copy file by file. Every
# round trip of t0220 (content, modes, owners, links, holes, attributes, deletions, crashes,
# the simulated full disk) runs on it, then what only btrfs does (t0220's end).
# run.sh: a btrfs filesystem for both passes
# run.sh: subordinate ids for the uid pass
# shellcheck disable=SC1091 # t0220 is sourced whole
if [ -z "${SBX_TEST_BTRFS:-}" ] || [ ! -d "$SBX_TEST_BTRFS" ]; then
	. "$(dirname "$0")/lib.sh"
	test_skip 'snapshots on btrfs' \
		'run.sh mounts a btrfs for this file only as root, with mkfs.btrfs and a loop device'
	test_done
fi
export TMPDIR=$SBX_TEST_BTRFS SNAP_ON_BTRFS=1
. "$(dirname "$0")/t0220-snapshot.sh"
