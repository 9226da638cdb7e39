#!/bin/bash
# create --nested: inside, unshare -r, a new pid namespace with its own /proc, bwrap, rootless
# podman and Chromium's own sandbox run; each fails with EPERM in a sandbox without it, and
# what the rest of the boundary refuses stays refused. Hosted providers refuse the option.
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS unshare bwrap

test_expect_success 'set-up: a --nested sandbox and one without' '
	sbx create --name nest --nested --net none >/dev/null &&
	sbx create --name flat --net none >/dev/null &&
	sbx inspect --json nest >n.json && sbx inspect --json flat >f.json &&
	json_assert n.json "assert r[\"options\"][\"nested\"] is True, r[\"options\"]" &&
	json_assert f.json "assert \"nested\" not in r[\"options\"], r[\"options\"]"
'

test_expect_success 'hosted providers refuse --nested (125) before any record' '
	for p in e2b daytona; do
		expect_code 125 env E2B_API_KEY=k DAYTONA_API_KEY=k "$SBX" create --provider $p --nested 2>e &&
		expect_one_error_line e "provider .$p. does not support --nested" || exit 1
	done &&
	test "$(sbx ls -q | wc -l)" -eq 2 &&
	sbx provider ls --json >p.json &&
	json_assert p.json "
caps = {x[\"name\"]: x[\"capabilities\"] for x in r}
assert \"nested\" in caps[\"local\"] and \"nested\" not in caps[\"e2b\"] and \"nested\" not in caps[\"daytona\"], caps"
'

test_expect_success 'unshare -r: a user namespace of its own (control: EPERM without --nested)' '
	sbx exec nest -- unshare -r id >out 2>&1 && test_grep "^uid=0(root) gid=0(root)" out &&
	sbx exec nest -- unshare -r cat /proc/self/uid_map >out && test_match "^ +0 +0 +1$" "$(cat out)" &&
	expect_code 1 sbx exec flat -- unshare -r id 2>err &&
	test_grep "unshare failed: Operation not permitted" err
'

test_expect_success 'unshare -rmpf --mount-proc: a pid namespace and a /proc of its own (control: EPERM)' '
	sbx exec nest -- unshare -rmpf --mount-proc ps -eo pid,comm >out 2>&1 &&
	test_eq "2" "$(wc -l <out)" "ps sees itself alone" && test_grep -E "^ +1 ps$" out &&
	expect_code 1 sbx exec flat -- unshare -rmpf --mount-proc ps 2>err &&
	test_grep "unshare failed: Operation not permitted" err
'

test_expect_success 'bwrap runs a command in namespaces of its own (control: EPERM)' '
	bw="bwrap --unshare-all --ro-bind / / --proc /proc --dev /dev --tmpfs /tmp" &&
	sbx exec nest -- $bw sh -c "echo in-bwrap; ls -A /tmp | wc -l; ps -eo pid=,comm=" >out 2>&1 &&
	test_grep -x in-bwrap out && test_grep -x 0 out && test_grep -E "^ +1 bwrap$" out &&
	test_grep ! sbx-init out &&
	expect_code 1 sbx exec flat -- $bw true 2>err &&
	test_grep "No permissions to create new namespace" err
'

test_expect_success 'what the sandbox itself may not do stays refused with --nested' '
	# its own mounts: no capability in the sandbox namespace (the kernel says so, not the filter)
	expect_code 32 sbx exec nest -- mount -t tmpfs none /mnt 2>err &&
	test_grep "permission denied" err &&
	sbx exec nest -- unshare -rm sh -c "mount -t tmpfs none /mnt && echo mounted" >out &&
	test_grep -x mounted out &&
	# a user namespace made inside cannot reach init or the sandbox mounts beyond its own copy
	expect_code 1 sbx exec nest -- unshare -r cat /proc/1/environ 2>err &&
	test_grep "Permission denied" err &&
	expect_code 1 sbx exec nest -- unshare -r nsenter -t 1 -m true 2>err &&
	test_grep "cannot open /proc/1/ns/mnt: Permission denied" err &&
	# the sandbox network: not its to change; one made inside is its own, with no way out
	expect_code 2 sbx exec nest -- unshare -r ip link set lo down 2>err &&
	test_grep "Operation not permitted" err &&
	sbx exec nest -- unshare -rn sh -c "ip link set lo up && ip route get 1.1.1.1" 2>err;
	test_grep "Network is unreachable" err &&
	# sysfs: only read-only, and only in a network namespace of its own
	sbx exec nest -- unshare -rmn sh -c "mount -t sysfs -o ro sysfs /mnt && test -d /mnt/class" &&
	expect_code 32 sbx exec nest -- unshare -rmn mount -t sysfs sysfs /mnt 2>err &&
	expect_code 32 sbx exec nest -- unshare -rm mount -t sysfs -o ro sysfs /mnt 2>err
'

test_expect_success 'cp into and out of a --nested sandbox (its helper keeps the strict filter)' '
	echo payload >f && sbx cp f nest:/tmp/f && sbx cp nest:/tmp/f back && test_grep -x payload back
'

# a rootless podman run of an image imported from a tarball holding busybox: as uid 1000 in a
# user namespace of the sandbox's own (its ids have no /etc/subuid range: podman maps that one
# uid), vfs storage and no keyring (keyctl stays refused), no cgroups, no network. crun looks at
# the filesystem type of /sys/fs/cgroup even with --cgroups=disabled: a cgroup2 of a cgroup
# namespace of its own is mounted there when the sandbox has none
cat >pod.sh <<'EOF'
set -eu
cd /tmp
rm -rf rootfs pod && mkdir -p rootfs/bin pod/run
cp /bin/busybox rootfs/bin/busybox
ln -s busybox rootfs/bin/sh
ln -s busybox rootfs/bin/echo
tar --owner=0 --group=0 --numeric-owner -C rootfs -cf bb.tar .
export HOME=/tmp/pod XDG_RUNTIME_DIR=/tmp/pod/run CONTAINERS_CONF=/tmp/pod/containers.conf
printf '[containers]\nkeyring = false\n' >"$CONTAINERS_CONF"
p="podman --root /tmp/pod/root --runroot /tmp/pod/runroot --storage-driver vfs
	--cgroup-manager cgroupfs --events-backend file --log-level error"
$p import -q bb.tar localhost/bb >/dev/null
$p run --rm --cgroups=disabled --network=none localhost/bb sh -c 'echo hello from podman: $(cat /proc/self/uid_map)'
EOF
cat >podwrap.sh <<'EOF'
if [ "$(stat -f -c %T /sys/fs/cgroup)" != cgroup2fs ]; then
	exec unshare -rmC sh -c 'mount -t cgroup2 none /sys/fs/cgroup &&
		exec unshare --map-user=1000 --map-group=1000 sh /tmp/pod.sh'
fi
exec unshare --map-user=1000 --map-group=1000 sh /tmp/pod.sh
EOF

if ! test_have_prereq podman; then
	test_skip 'rootless podman runs a container' 'podman not installed (scripts/install-deps)'
else
	test_expect_success 'rootless podman runs a container from an imported image (control: EPERM)' '
		sbx cp pod.sh nest:/tmp/pod.sh && sbx cp podwrap.sh nest:/tmp/podwrap.sh &&
		sbx exec nest -- sh /tmp/podwrap.sh >out 2>err || { cat err; exit 1; }
		test_match "^hello from podman: +0 +1000 +1$" "$(cat out)" &&
		sbx cp pod.sh flat:/tmp/pod.sh && sbx cp podwrap.sh flat:/tmp/podwrap.sh &&
		expect_code 1 sbx exec flat -- sh /tmp/podwrap.sh >out 2>err &&
		test_grep "unshare failed: Operation not permitted" err
	'
fi

if ! test_have_prereq chromium; then
	test_skip 'Chromium runs with its own sandbox' 'chromium not installed (scripts/install-deps)'
else
	test_expect_success 'Chromium runs headless with its own sandbox, no --no-sandbox (control: EPERM)' '
		echo "<html><body><p id=x>nested page</p></body></html>" >page.html &&
		sbx cp page.html nest:/tmp/page.html && sbx cp page.html flat:/tmp/page.html &&
		chr="unshare --map-user=1000 --map-group=1000 chromium --headless --dump-dom file:///tmp/page.html" &&
		sbx exec -e HOME=/tmp/chr nest -- $chr >out 2>err || { tail -5 err; exit 1; }
		test_grep "<p id=\"x\">nested page</p>" out &&
		expect_code 1 sbx exec -e HOME=/tmp/chr flat -- $chr >out 2>err &&
		test_grep "unshare failed: Operation not permitted" err &&
		if [ "$(id -u)" -eq 0 ]; then
			# as a user of the sandbox, without unshare: Chromium finds no sandbox to use
			expect_code 1 sbx exec -u 1000 -e HOME=/tmp/chr flat -- \
				chromium --headless --dump-dom file:///tmp/page.html >out 2>err &&
			test_grep "No usable sandbox" err
		fi
	'
fi

test_expect_success 'a released and resumed --nested sandbox is still one, the other still not' '
	sbx pause --release nest >/dev/null && sbx resume nest >/dev/null &&
	sbx pause --release flat >/dev/null && sbx resume flat >/dev/null &&
	sbx exec nest -- unshare -r true &&
	expect_code 1 sbx exec flat -- unshare -r true 2>/dev/null
'

test_expect_success 'nothing of the nested namespaces outlives rm' '
	sbx exec -d nest -- unshare -rmpf --mount-proc sleep 300 &&
	sbx rm -f nest flat >/dev/null && test -z "$(sbx ls -q)"
'

test_done
