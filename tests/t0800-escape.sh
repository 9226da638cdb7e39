#!/bin/bash
# Escape attempts, one class each, as root and as another uid. Every blocked attempt has a
# control showing the same action works outside the sandbox (a refusal alone proves nothing):
#  1. sbx's helpers that touch sandbox content run confined and load nothing from it: the cp
#     child's limits; a planted glibc charset module; an external decompressor found
#     through PATH; the same for a released sandbox and for image archives unpacked on the host
#  2. the sbx binary is out of reach of /proc/*/exe (CVE-2019-5736)
#  3. no terminal of the caller's enters a sandbox without -t
#  6. --disk bounds what a sandbox writes
#  9. --nested: namespaces and mounts a sandbox makes inside reach nothing of the host, init or
#     what sbx sees; what the filter refuses beyond namespaces and mounts stays refused
# 10. links the sandbox plants where sbx binds from (its /run/sbx/hostname and hosts, its /tmp,
#     an image's or a snapshot's /tmp) reach nothing of the host
# Every class that can apply runs against --runtime gvisor too (the same checks; where gVisor's
# kernel shows things otherwise, the check says so); --nested is refused there.
# The other classes have files of their own: 4, 5 and 8 (the host through the proxy, the
# supervisor under load, previews without a token) t0810-escape-net.sh, which runs whole in a
# network namespace it makes; 7 (sandbox-chosen text on the terminal) t0820-term-safe.sh.
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS cc busybox bsdtar

export TMUX_TMPDIR="$TRASH"
sock="sbx-t0800-$$"
tm() { tmux -L "$sock" "$@"; }
# the terminal's tmux session: one per round (killing a server's last session ends the server,
# and a new session asked of it meanwhile finds it gone)
ses=esc
screen() { tm capture-pane -p -t "$ses"; }
wait_screen() { # PATTERN
	local i
	for i in $(seq 100); do screen | grep -q -- "$1" && return 0; sleep 0.1; done
	say "screen never showed '$1':" >&2
	screen >&2
	return 1
}
test_atexit 'tm kill-server'

# where this host's glibc looks for charset conversion modules
# shellcheck disable=SC2012 # fixed system paths, sorted as one list: ls is right here
GCONV_DIR=$(dirname "$(ls /usr/lib/*/gconv/gconv-modules* /usr/lib*/gconv/gconv-modules* 2>/dev/null | head -n 1)")

# a glibc charset module whose constructor leaves a mark in its working directory (or /tmp)
make_evil_module() { # DIR
	mkdir -p "$1" &&
	cat >evil.c <<-\EOF &&
	#include <fcntl.h>
	#include <unistd.h>
	__attribute__((constructor)) static void pwn(void)
	{
		int fd = open("gconv-pwned", O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			(void)!write(fd, "loaded\n", 7);
			close(fd);
		}
	}
	int gconv_init(void *step) { (void)step; return 1; }
	int gconv(void) { return 1; }
	EOF
	cc -shared -fPIC -o "$1/EVIL.so" evil.c &&
	printf 'module\tANSI_X3.4-1968//\tUTF-8//\tEVIL\t1\nmodule\tUTF-8//\tANSI_X3.4-1968//\tEVIL\t1\n' \
		>"$1/gconv-modules"
}

# a tar whose first bytes say lzop: libarchive without liblzo runs 'lzop -d' to read it
printf '\211LZO\000\r\n\032\nrest' >evil.lzo
mkdir -p pay && echo payload >pay/f && tar -C pay -cf payload.tar f

# an image whose files plant all of it: busybox, the module where glibc looks, and an 'lzop'
make_evil_image() { # NAME
	rm -rf img && mkdir -p img/bin img/usr/bin img/workspace img/tmp &&
	cp "$(command -v busybox)" img/bin/busybox &&
	for c in sh ls cat head readlink sleep echo; do ln -s busybox "img/bin/$c"; done &&
	make_evil_module "img$GCONV_DIR" &&
	cp payload.tar img/payload.tar &&
	printf '#!/bin/sh\necho ran >/lzop-pwned\ncat /payload.tar\n' >img/usr/bin/lzop &&
	chmod 755 img/usr/bin/lzop &&
	sbx image import --rootfs img "$1" >/dev/null
}

# Classes 1 and 2 run three times: in sandboxes as created by default, in --nested ones, whose
# processes may make user, mount and pid namespaces of their own (there, the watcher of class 2
# runs in a user namespace it made), and under --runtime gvisor; the attempts only a --nested
# sandbox can make are class 9
GVISOR=
if [ -x "${SBX_RUNSC:-/usr/bin/runsc}" ]; then
	GVISOR=gvisor
else
	NO_GVISOR="no runsc (scripts/install-deps installs it)"
fi
# bg_exec SB CMD...: CMD runs on in the background of the sandbox (exec -d; under gVisor, whose
# exec -d is not built yet, a shell's background job)
bg_exec() {
	local sb=$1
	shift
	if [ "$mode" = gvisor ]; then
		"$SBX" exec "$sb" sh -c 'nohup "$@" >/dev/null 2>&1 &' sh "$@"
	else
		"$SBX" exec -d "$sb" "$@" >/dev/null
	fi
}
# the processes of the copy while it waits on a stream that does not come
cp_blocked() { # SB: starts 'sbx cp - SB:/workspace' reading a fifo; sets CP_PID
	rm -f fifo && mkfifo fifo &&
	{ SECRET_TOKEN=s3cr3t "$SBX" cp - "$1:/workspace" <fifo >cp.out 2>&1 & CP_PID=$!; } &&
	exec 7>fifo
}
cp_unblock() { tar -cf - -T /dev/null >&7; exec 7>&-; wait "$CP_PID"; }
# the status fields of a process
status_of() { grep -E "^(NoNewPrivs|Seccomp|CapEff):" "/proc/$1/status"; }

for mode in plain nested gvisor; do
case $mode in
nested) opts=--nested esc=escn ev=evn wrap="unshare -r" in_mode=" (--nested)" ;;
gvisor) opts="--runtime gvisor" esc=escg ev=evg wrap='' in_mode=" (--runtime gvisor)" ;;
*) opts='' esc=esc ev=ev wrap='' in_mode='' ;;
esac
if [ $mode = gvisor ] && [ -z "$GVISOR" ]; then
	test_skip "classes 1 and 2 under --runtime gvisor" "$NO_GVISOR"
	continue
fi

# --- 1. helpers -------------------------------------------------------------------------------

test_expect_success "set-up: sandboxes on the host view and on a planted image$in_mode" '
	sbx create $opts --name $esc >/dev/null &&
	make_evil_image evil:$mode && sbx create $opts --name $ev --image evil:$mode >/dev/null
'

[ $mode != plain ] || test_expect_success "control: the planted charset module and lzop do run when reached$in_mode" '
	make_evil_module ctl && rm -f gconv-pwned &&
	{ GCONV_PATH=$PWD/ctl iconv -f ANSI_X3.4-1968 -t UTF-8 </dev/null >/dev/null 2>&1; true; } &&
	test -s gconv-pwned &&
	mkdir -p hostbin bout && printf "#!/bin/sh\necho ran >lzop-ran\ncat %s/payload.tar\n" "$PWD" >hostbin/lzop &&
	chmod 755 hostbin/lzop && PATH=$PWD/hostbin:$PATH bsdtar -xf evil.lzo -C bout &&
	test -s lzop-ran && test_eq payload "$(cat bout/f)"
'

test_expect_success "cp into and out of a sandbox loads no charset module of the sandbox$in_mode" '
	mkdir -p src && echo hi >"src/naïve-é.txt" &&
	sbx cp src $ev:/workspace/ && sbx cp $ev:/workspace/src out &&
	test_eq hi "$(cat "out/naïve-é.txt")" &&
	sbx pause --release $ev >/dev/null && sbx cp src $ev:/workspace/again &&
	sbx cp $ev:/workspace/again out2 && sbx resume $ev >/dev/null &&
	sbx exec $ev ls / >ls.out && test_grep ! pwned ls.out
'

test_expect_success "a stream that needs an external decompressor is refused, the planted one never runs$in_mode" '
	expect_code 125 sbx cp - $ev:/workspace <evil.lzo 2>err &&
	expect_one_error_line err "Unrecognized archive format" &&
	sbx pause --release $ev >/dev/null &&
	expect_code 125 sbx cp - $ev:/workspace <evil.lzo 2>err &&
	sbx resume $ev >/dev/null &&
	sbx exec $ev ls / /workspace >ls.out && test_grep ! -e pwned -e "^f$" ls.out &&
	: "the same on the host: an image archive is never passed to lzop either" &&
	mkdir -p pathbin && cp hostbin/lzop pathbin/ && rm -f lzop-ran &&
	PATH=$PWD/pathbin:$PATH expect_code 125 sbx image import evil.lzo 2>/dev/null &&
	test ! -e lzop-ran
'

[ $mode = gvisor ] || test_expect_success "the cp helper of a running sandbox is confined as a command of it is$in_mode" '
	cp_blocked $esc &&
	for i in $(seq 50); do
		sbx exec $esc sh -c "for d in /proc/[0-9]*; do
			[ \"\$(cat \$d/comm 2>/dev/null)\" = sbx ] && grep -E \"^(NoNewPrivs|Seccomp|CapEff):\" \$d/status
		done; grep ^CapEff: /proc/self/status | sed s/^/self/" >st && grep -q NoNewPrivs st && break
		sleep 0.1
	done &&
	cat st &&
	test_grep "^NoNewPrivs:[[:space:]]*1" st && test_grep "^Seccomp:[[:space:]]*2" st &&
	test_eq "$(awk "/^selfCapEff:/ { print \$2 }" st)" "$(awk "/^CapEff:/ { print \$2 }" st)" &&
	: "control: the sbx CLI on the host has none of it, and has the caller environment" &&
	status_of "$CP_PID" >cli && test_grep "^NoNewPrivs:[[:space:]]*0" cli &&
	test_grep "^Seccomp:[[:space:]]*0" cli && tr "\0" "\n" <"/proc/$CP_PID/environ" | test_grep s3cr3t &&
	if [ "$(id -u)" -eq 0 ]; then
		: "as root the helper can be read from the host: no environment, the sandbox net" &&
		init=$(awk "{ print \$1 }" "$SBX_HOME/sandboxes/$(sbx inspect $esc | python3 -c "import json,sys; print(json.load(sys.stdin)[\"id\"])")/pids") &&
		for p in $(ls /proc | grep -E "^[0-9]+$"); do
			[ "$(cat /proc/$p/comm 2>/dev/null)" = sbx ] || continue
			[ "$(readlink /proc/$p/ns/pid)" = "$(readlink /proc/$init/ns/pid)" ] || continue
			test ! -s "/proc/$p/environ" &&
			test_eq "$(readlink /proc/$init/ns/net)" "$(readlink /proc/$p/ns/net)" &&
			test_ne "$(readlink /proc/self/ns/net)" "$(readlink /proc/$p/ns/net)" || exit 1
			found=1
		done && test_ne "" "$found"
	fi &&
	cp_unblock
'

# under gVisor the helper runs beside gVisor's kernel, in init's namespaces, where the
# sandbox's processes (gVisor's) cannot see it: it is looked at from the host
[ $mode != gvisor ] || test_expect_success "the cp helper of a running sandbox is confined as a command of it is$in_mode" '
	: "a local sandbox'"'"'s command (gVisor drops CAP_NET_RAW from its own on the host'"'"'s network)" &&
	sbx exec esc grep ^CapEff: /proc/self/status | sed s/^/self/ >self &&
	cp_blocked $esc &&
	for i in $(seq 50); do
		helper=; for k in $(pgrep -P "$CP_PID"); do h=$(pgrep -P "$k") && helper=$h; done
		test -n "$helper" && break; sleep 0.1
	done &&
	status_of "$helper" >st && cat st self &&
	test_grep "^NoNewPrivs:[[:space:]]*1" st && test_grep "^Seccomp:[[:space:]]*2" st &&
	test_eq "$(awk "/^selfCapEff:/ { print \$2 }" self)" "$(awk "/^CapEff:/ { print \$2 }" st)" &&
	: "control: the sbx CLI on the host has none of it, and has the caller environment" &&
	status_of "$CP_PID" >cli && test_grep "^NoNewPrivs:[[:space:]]*0" cli &&
	test_grep "^Seccomp:[[:space:]]*0" cli && tr "\0" "\n" <"/proc/$CP_PID/environ" | test_grep s3cr3t &&
	if [ "$(id -u)" -eq 0 ]; then
		init=$(awk "{ print \$1 }" "$SBX_HOME/sandboxes/$(sbx inspect $esc | python3 -c "import json,sys; print(json.load(sys.stdin)[\"id\"])")/pids") &&
		test ! -s "/proc/$helper/environ" &&
		test_eq "$(readlink /proc/$init/ns/pid)" "$(readlink /proc/$helper/ns/pid)" &&
		test_eq "$(readlink /proc/$init/ns/net)" "$(readlink /proc/$helper/ns/net)" &&
		test_ne "$(readlink /proc/self/ns/net)" "$(readlink /proc/$helper/ns/net)"
	fi &&
	cp_unblock
'

test_expect_success "the cp helper of a released sandbox is confined the same, in namespaces of its own$in_mode" '
	sbx pause --release $esc >/dev/null && cp_blocked $esc &&
	for i in $(seq 50); do
		kids=$(pgrep -P "$CP_PID"); for k in $kids; do helper=$(pgrep -P "$k"); done
		test -n "${helper:-}" && break; sleep 0.1
	done &&
	status_of "$helper" >st && cat st && status_of "$CP_PID" >cli &&
	test_grep "^NoNewPrivs:[[:space:]]*1" st && test_grep "^Seccomp:[[:space:]]*2" st &&
	: "control: the CLI that started it is not confined" &&
	test_grep "^NoNewPrivs:[[:space:]]*0" cli && test_grep "^Seccomp:[[:space:]]*0" cli &&
	if [ "$(id -u)" -eq 0 ]; then
		test ! -s "/proc/$helper/environ" &&
		for ns in pid net ipc uts cgroup mnt user; do
			test_ne "$(readlink /proc/self/ns/$ns)" "$(readlink /proc/$helper/ns/$ns)" || exit 1
		done
	fi &&
	cp_unblock && sbx resume $esc >/dev/null
'

# --- 2. the sbx binary ----------------------------------------------------------------------

test_expect_success "nothing in a sandbox reaches the sbx binary through /proc/*/exe$in_mode" '
	: "a waiter of the exec -d before (mysbx) may still run: a new file, not a rewrite" &&
	rm -f mysbx && cp "$SBX" mysbx && sum=$(sha256sum <mysbx) &&
	: "a watcher that keeps every /proc/PID/exe it can read, the way an attacker would" &&
	SBX=$PWD/mysbx bg_exec $esc $wrap sh -c "for i in \$(seq 300); do echo \$i >/workspace/ran; for p in /proc/[0-9]*; do
		l=\$(readlink \$p/exe 2>/dev/null) && echo \"\$l\" >>/workspace/seen
		case \"\$l\" in *mysbx*) exec 3<\$p/exe && echo grabbed >>/workspace/grabbed;; esac
	done; sleep 0.01; done" &&
	printf "#!/proc/self/exe\n" >x && chmod 755 x && ./mysbx cp x $esc:/workspace/x &&
	: "under gVisor runsc exec starts the command itself, and gVisor will not execute
	   /proc/self/exe for it (126); a local sandbox finds nothing there (127)" &&
	if [ $mode = gvisor ]; then xcode=126 scode=126; else xcode=127 scode=127; fi &&
	for i in 1 2 3 4 5; do
		expect_code $xcode ./mysbx exec $esc /workspace/x --version >xout 2>&1 || exit 1
		test_grep ! "sbx 0" xout || exit 1
		expect_code $scode ./mysbx exec $esc /proc/self/exe --version >xout 2>&1 || exit 1
		test_grep ! "sbx 0" xout || exit 1
	done &&
	./mysbx exec $esc sh -c "ln -sf /proc/self/exe /workspace/l" &&
	expect_code $scode ./mysbx exec $esc /workspace/l --version >xout 2>&1 && test_grep ! "sbx 0" xout &&
	: "init runs the sbx binary (under gVisor, sbx-ginit): its exe is out of reach" &&
	expect_code 1 ./mysbx exec $esc $wrap cat /proc/1/exe >/dev/null 2>&1 &&
	expect_code 2 ./mysbx exec $esc $wrap sh -c "echo x >>/proc/1/exe" 2>/dev/null &&
	sleep 1 &&
	: "control: the watcher runs" && ./mysbx exec $esc test -s /workspace/ran &&
	./mysbx exec $esc sh -c "cat /workspace/seen 2>/dev/null; true" >seen &&
	if [ $mode != gvisor ]; then
		: "control: it does read the exe of the sandbox processes it can (gVisor lets a
		   process read no other'"'"'s exe)" &&
		test_grep -e /bin/ -e /usr/ seen
	fi && test_grep ! mysbx seen &&
	test_eq 0 "$(./mysbx exec $esc sh -c "cat /workspace/grabbed 2>/dev/null | wc -l")" &&
	./mysbx exec $esc sh -c "exec 3</proc/self/exe && echo own-exe-readable" | test_grep own-exe-readable &&
	test_eq "$sum" "$(sha256sum <mysbx)"
'
done

# --- 9. what a --nested sandbox may do with namespaces of its own ------------------------------

# calls that stay refused with --nested, made as root of a user namespace of the probe's own:
# "NAME ERRNO" each (0: it worked)
cat >probe.c <<-\EOF
	#define _GNU_SOURCE
	#include <errno.h>
	#include <fcntl.h>
	#include <linux/keyctl.h>
	#include <sched.h>
	#include <stdio.h>
	#include <string.h>
	#include <sys/syscall.h>
	#include <unistd.h>
	static void say(const char *what, long r) { printf("%s %d\n", what, r < 0 ? errno : 0); }
	int main(int argc, char **argv)
	{
		char h[512] = { 0 };
		(void)argv;
		if (argc > 1 && unshare(CLONE_NEWUSER) < 0)
			return perror("unshare"), 2;
		say("keyctl", syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, "sbx-probe"));
		say("add_key", syscall(SYS_add_key, "user", "sbx-probe", "x", 1, KEY_SPEC_PROCESS_KEYRING));
		say("bpf", syscall(SYS_bpf, 0, h, 64));
		say("perf_event_open", syscall(SYS_perf_event_open, h, 0, -1, -1, 0));
		say("open_by_handle_at", syscall(SYS_open_by_handle_at, AT_FDCWD, h, O_RDONLY));
		say("name_to_handle_at", syscall(SYS_name_to_handle_at, AT_FDCWD, "/", h, h + 40, 0));
		say("init_module", syscall(SYS_init_module, h, 0, ""));
		say("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0));
		say("io_uring_setup", syscall(SYS_io_uring_setup, 1, h));
		say("process_vm_readv", syscall(SYS_process_vm_readv, getpid(), NULL, 0, NULL, 0, 0));
		say("syslog", syscall(SYS_syslog, 3, h, 1));
		return 0;
	}
EOF

test_expect_success 'set-up: a --nested sandbox, and the probe' '
	sbx create --nested --name nst >/dev/null && sbx create --name flt >/dev/null &&
	cc -o probe probe.c && sbx cp probe nst:/workspace/probe && sbx cp probe flt:/workspace/probe
'

test_expect_success 'keyrings, BPF, perf, handles, modules, kexec, io_uring, other memory: still EPERM inside a namespace of its own' '
	sbx exec nst /workspace/probe userns >in && cat in &&
	test_eq 11 "$(grep -c " 1$" in)" "every call EPERM" &&
	: "control: outside any sandbox, in a user namespace too, the kernel answers otherwise" &&
	./probe userns >n9.out && cat n9.out && test_grep -x "keyctl 0" n9.out && test_grep -x "process_vm_readv 0" n9.out &&
	: "and without --nested not even the namespace is allowed" &&
	expect_code 2 sbx exec flt /workspace/probe userns 2>err && test_grep "Operation not permitted" err
'

test_expect_success 'mounts of a namespace made inside change nothing that sbx or the host sees' '
	sum=$(sha256sum </usr/bin/id) &&
	printf "#!/bin/sh\necho fake-id\n" >fake && sbx cp fake nst:/workspace/fake &&
	sbx exec -d nst unshare -rm sh -c "chmod 755 /workspace/fake &&
		mount --bind /workspace/fake /usr/bin/id && mount --bind /workspace/fake /proc/self/exe;
		id >/workspace/inner; sleep 300" &&
	for i in $(seq 50); do sbx exec nst test -s /workspace/inner && break; sleep 0.1; done &&
	: "control: inside its own mount namespace the bind did take" &&
	test_eq fake-id "$(sbx exec nst cat /workspace/inner)" &&
	sbx exec nst id -u >real && test_eq 0 "$(cat real)" &&
	test_eq "$sum" "$(sha256sum </usr/bin/id)"
'

test_expect_success 'the sandbox mounts are locked: no remount rw, no unmount revealing what lies under' '
	expect_code 1 sbx exec nst unshare -rm sh -c "mount -o remount,bind,rw /usr; touch /usr/sbx-x" 2>err &&
	test_grep "Read-only file system" err &&
	expect_code 32 sbx exec nst unshare -rm umount /etc/hostname 2>err &&
	expect_code 32 sbx exec nst unshare -rm umount -l /proc 2>err &&
	test_eq "$(sbx exec nst cat /etc/hostname)" "$(sbx exec nst unshare -rm sh -c "umount /etc/hostname 2>/dev/null; cat /etc/hostname")" &&
	: "control: a mount it made itself it may remount and unmount" &&
	sbx exec nst unshare -rm sh -c "mount -t tmpfs t /mnt && mount -o remount,bind,ro /mnt && umount /mnt"
'

test_expect_success 'a new /proc shows only the processes of its own pid namespace, never the host or init' '
	expect_code 32 sbx exec nst unshare -rm mount -t proc proc /mnt 2>err &&
	sbx exec nst unshare -rmpf --mount-proc sh -c "echo /proc/[0-9]*; read -r c </proc/1/comm; echo \$c" >n9.out &&
	test_eq "/proc/1 sh" "$(echo $(cat n9.out))" &&
	: "setns through /proc/1/ns: its own pid 1 only, the sandbox init out of reach" &&
	sbx exec nst unshare -rmpf --mount-proc nsenter -t 1 -m -p true &&
	expect_code 1 sbx exec nst unshare -r nsenter -t 1 -m true 2>err &&
	test_grep "Permission denied" err &&
	: "control: the same nsenter as the sandbox itself is refused too, it lacks the capability" &&
	expect_code 1 sbx exec nst nsenter -t 1 -m true 2>err
'

# (a --nested sandbox with a cgroup of its own has it delegated: it may make cgroups below it,
# t0310 checks that; the files that bound it stay the host's)
test_expect_success 'a cgroup hierarchy mounted inside: its own, and what bounds it is not its to write' '
	sbx exec nst unshare -rmC sh -c "mount -t cgroup2 none /mnt && tail -n 1 /proc/self/cgroup;
		echo 1 >/mnt/cgroup.max.depth 2>&1; echo 1 >/mnt/cgroup.max.descendants 2>&1" >n9.out 2>&1;
	cat n9.out && test_grep -x "0::/" n9.out && test_eq 2 "$(grep -c "Permission denied" n9.out)"
'

if [ -n "$GVISOR" ]; then
	test_expect_success '--nested is refused under --runtime gvisor, in one line (control: without --nested)' '
		expect_code 125 sbx create --runtime gvisor --nested --name gnst 2>err &&
		expect_one_error_line err "^sbx: error: --runtime gvisor does not take --nested" &&
		test ! -e "$SBX_HOME/names/gnst" &&
		sbx create --runtime gvisor --name gnst >/dev/null && sbx rm -f gnst >/dev/null
	'
else
	test_skip '--nested is refused under --runtime gvisor' "$NO_GVISOR"
fi

# --- 3. the caller's terminal ---------------------------------------------------------------

for rt in local gvisor; do
if [ $rt = gvisor ]; then
	term=termg ropt="--runtime gvisor" in_rt=" (--runtime gvisor)" ses=escg
	: "gVisor shows the descriptors runsc exec was given as host:[N]"
	fdkind=host:
else
	term=term ropt='' in_rt='' fdkind=pipe: ses=esc
fi
if ! test_have_prereq tmux; then
	test_skip "terminals without -t$in_rt" 'tmux is not installed'
	continue
fi
if [ $rt = gvisor ] && [ -z "$GVISOR" ]; then
	test_skip "terminals without -t$in_rt" "$NO_GVISOR"
	continue
fi
test_expect_success "without -t no terminal fd enters: a process left behind reads and writes nothing$in_rt" '
	sbx create $ropt --name $term >/dev/null &&
	cat >leave.sh <<-\EOS &&
	fds=$(for f in /proc/$$/fd/*; do echo "$f -> $(readlink "$f")"; done)
	echo "$fds" >/workspace/fds
	exec 3<&0 # a background job of sh gets /dev/null as input; not this one
	(sleep 1; head -n 1 <&3 >/workspace/stolen 2>/dev/null) &
	(sleep 1; echo LATE-SBX-WRITE) &
	echo started
	EOS
	sbx cp leave.sh $term:/workspace/leave.sh &&
	tm new-session -d -s $ses -x 150 -y 40 "bash --norc --noprofile" &&
	: "bash sleeps after sbx returns: what is typed meanwhile waits in the terminal for any reader" &&
	tm send-keys -t $ses "\"$SBX\" exec -i $term sh /workspace/leave.sh; echo rc=\$?; sleep 3" Enter &&
	wait_screen "rc=0" &&
	tm send-keys -t $ses "echo typed-after-return-SBX" Enter &&
	sleep 3.5 &&
	sbx exec $term cat /workspace/fds >fds && cat fds &&
	test_grep ! /dev/pts fds && test_grep "0 ->.*$fdkind" fds && test_grep "1 ->.*$fdkind" fds &&
	test_eq "" "$(sbx exec $term sh -c "cat /workspace/stolen 2>/dev/null")" &&
	screen | test_grep ! LATE-SBX-WRITE &&
	: "control: the same on the host, in a session of its own, steals and writes" &&
	rm -f stolen-host &&
	tm send-keys -t $ses "clear; ls -l /proc/self/fd/ >hostfds; setsid sh -c \"exec 3<&0; (sleep 1; head -n 1 <&3 >$TRASH/stolen-host) & (sleep 1; echo LATE-HOST-WRITE) &\"; echo rc2=\$?; sleep 3" Enter &&
	wait_screen "rc2=0" &&
	tm send-keys -t $ses "echo typed-after-return-HOST" Enter &&
	wait_screen "LATE-HOST-WRITE" &&
	for i in $(seq 40); do grep -q typed-after-return-HOST stolen-host 2>/dev/null && break; sleep 0.1; done &&
	test_grep typed-after-return-HOST stolen-host && test_grep /dev/pts hostfds
'

if [ $rt = gvisor ]; then
	: "exec on gVisor relays stdout and stderr through a pipe each (gvisor-exec.c): what the two
	   carry reaches one terminal in the order the relay reads it, not the command wrote it"
	order='screen | test_grep -x out-1 && screen | test_grep -x err-2 && screen | test_grep -x out-3'
else
	order='screen | grep -x -A2 out-1 | tr "\n" " " | test_grep "out-1 err-2 out-3"'
fi
test_expect_success "without -t, output through the relay keeps its status (and order, but for gVisor's two streams); pipes still pass straight$in_rt" '
	tm send-keys -t $ses "clear; \"$SBX\" exec $term sh -c \"echo out-1; echo err-2 >&2; echo out-3; exit 7\"; echo rc3=\$?" Enter &&
	wait_screen "rc3=7" && eval "$order" &&
	sbx exec $term sh -c "readlink /proc/self/fd/1" | test_grep "^$fdkind"
'
done

# --- 6. the disk ----------------------------------------------------------------------------

for rt in local gvisor; do
if [ $rt = gvisor ]; then
	ropt="--runtime gvisor" in_rt=" (--runtime gvisor)"
	: "coreutils df asks statx what gVisor 20221219 answers with EINVAL: python asks statvfs"
	dfk='python3 -c "import os; s = os.statvfs(\"/workspace\"); print(s.f_blocks * s.f_frsize // 1024)"'
else
	ropt='' in_rt='' dfk="df -k /workspace | awk \"NR == 2 { print \\\$2 }\""
fi
if [ $rt = gvisor ] && [ -z "$GVISOR" ]; then
	test_skip "--disk$in_rt" "$NO_GVISOR"
	continue
fi
if [ "$(id -u)" -eq 0 ]; then
test_expect_success "--disk: writes stop at the size inside; without it the same write goes through$in_rt" '
	sbx create $ropt --name dk --disk 24m >/dev/null &&
	expect_code 1 sbx exec dk sh -c "dd if=/dev/zero of=/workspace/big bs=1M count=40 2>/dev/null" &&
	sbx exec dk sh -c "dd if=/dev/zero of=/tmp/more bs=1M count=40" 2>err; grep -q "No space left" err &&
	kib=$(sbx exec dk sh -c "$dfk") && test "$kib" -gt 0 && test "$kib" -lt $((24 * 1024)) &&
	id=$(sbx inspect dk | python3 -c "import json,sys; print(json.load(sys.stdin)[\"id\"])") &&
	test "$(du -k "$SBX_HOME/sandboxes/$id/disk.img" | cut -f1)" -le $((24 * 1024)) &&
	: "the disk goes with the sandbox through release, a copy, resume and rm" &&
	sbx pause --release dk >/dev/null && echo kept >kept && sbx cp kept dk:/workspace/kept &&
	sbx resume dk >/dev/null && test_eq kept "$(sbx exec dk cat /workspace/kept)" &&
	sbx rm -f dk >/dev/null && test ! -e "$SBX_HOME/sandboxes/$id" &&
	losetup -a 2>/dev/null | test_grep ! "$id" &&
	: "control: without --disk the same write succeeds" &&
	sbx create $ropt --name nodk >/dev/null &&
	sbx exec nodk sh -c "dd if=/dev/zero of=/workspace/big bs=1M count=40 2>/dev/null" &&
	sbx rm -f nodk >/dev/null
'
else
test_expect_success "--disk as an ordinary user: 125 saying it needs root, nothing left; without it, create works$in_rt" '
	before=$(ls "$SBX_HOME/sandboxes" | wc -l) &&
	expect_code 125 sbx create $ropt --name dk --disk 32m 2>err &&
	expect_one_error_line err "^sbx: error: --disk needs root" &&
	test_eq "$before" "$(ls "$SBX_HOME/sandboxes" | wc -l)" && test ! -e "$SBX_HOME/names/dk" &&
	sbx create $ropt --name nodk >/dev/null && sbx rm -f nodk >/dev/null
'
fi
done

test_expect_success '--disk: bad sizes are usage errors (125), and E2B refuses it' '
	expect_code 125 sbx create --disk 1m 2>/dev/null &&
	expect_code 125 sbx create --disk lots 2>/dev/null &&
	E2B_API_KEY=x expect_code 125 sbx create --provider e2b --disk 1g 2>err &&
	test_grep "does not support --disk" err
'

# --- 10. links where sbx binds from ------------------------------------------------------------

# A file of the host's outside /tmp (runsc's mount namespace used to show everything but /tmp)
# and outside anything a sandbox sees, readable by the host uid sandbox root has: were a link
# the sandbox plants followed on the host, it would be what the sandbox reads.
SECRET_DIR=$(mktemp -d /var/tmp/sbx-t0800.XXXXXX) && chmod 755 "$SECRET_DIR" &&
	echo "host-secret-$$" >"$SECRET_DIR/s" && chmod 644 "$SECRET_DIR/s"
test_atexit 'rm -rf "$SECRET_DIR"'
SECRET=$SECRET_DIR/s

test_expect_success 'control: the host file is there, readable by the host uid of sandbox root' '
	test_eq "host-secret-$$" "$(cat "$SECRET")" &&
	if [ "$(id -u)" -eq 0 ]; then
		test_eq "host-secret-$$" "$(setpriv --reuid 100000 --regid 100000 --clear-groups cat "$SECRET")"
	fi
'

# an image whose /tmp is a link to the host file's directory
mkdir -p lnkimg/bin lnkimg/workspace && cp "$(command -v busybox)" lnkimg/bin/busybox &&
	for c in sh cat readlink test ls echo; do ln -s busybox "lnkimg/bin/$c"; done &&
	ln -s "$SECRET_DIR" lnkimg/tmp

for rt in local gvisor; do
if [ $rt = gvisor ]; then
	ropt="--runtime gvisor" in_rt=" (--runtime gvisor)" sfx=g
else
	ropt='' in_rt='' sfx=l
fi
if [ $rt = gvisor ] && [ -z "$GVISOR" ]; then
	test_skip "class 10$in_rt" "$NO_GVISOR"
	continue
fi

test_expect_success "links planted at /run/sbx/hostname and hosts reach nothing of the host after a boot$in_rt" '
	sbx create $ropt --name ln$sfx >/dev/null &&
	sbx exec ln$sfx sh -c "rm /run/sbx/hostname /run/sbx/hosts && ln -s $SECRET /run/sbx/hostname && ln -s $SECRET /run/sbx/hosts" &&
	sbx pause --release ln$sfx >/dev/null && sbx resume ln$sfx >/dev/null &&
	: "control: the links are there, as planted" &&
	test_eq "$SECRET" "$(sbx exec ln$sfx readlink /run/sbx/hostname)" &&
	test_eq "$SECRET" "$(sbx exec ln$sfx readlink /run/sbx/hosts)" &&
	{ sbx exec ln$sfx sh -c "cat /etc/hostname /etc/hosts; cat /run/sbx/hostname" >lo 2>&1; true; } &&
	cat lo && test_grep ! host-secret lo &&
	if [ $rt = gvisor ]; then
		: "gVisor: its hostname and hosts are what sbx wrote" &&
		test_eq ln$sfx "$(sbx exec ln$sfx cat /etc/hostname)" &&
		sbx exec ln$sfx cat /etc/hosts | test_grep -x "127.0.1.1.ln$sfx"
	fi &&
	sbx rm -f ln$sfx >/dev/null
'

test_expect_success "an image whose /tmp is a link to the host reaches nothing of it$in_rt" '
	sbx image import --rootfs lnkimg lnktmp:$sfx >/dev/null &&
	sbx create $ropt --name li$sfx --image lnktmp:$sfx >/dev/null &&
	{ sbx exec li$sfx sh -c "cat /tmp/s; ls /tmp" >lo 2>&1; true; } && cat lo &&
	test_grep ! host-secret lo &&
	: "its /tmp is a directory of its files (a local sandbox'"'"'s upper directory has one over
	   the image'"'"'s; gVisor'"'"'s, a mount of its own, is made one again)" &&
	sbx exec li$sfx sh -c "echo mine >/tmp/t" && test_eq mine "$(sbx exec li$sfx cat /tmp/t)" &&
	test ! -e "$SECRET_DIR/t" && expect_code 1 sbx exec li$sfx test -L /tmp &&
	sbx rm -f li$sfx >/dev/null
'

test_expect_success "a fork of a snapshot whose /tmp is a link to the host reaches nothing of it$in_rt" '
	sbx create --name lsrc$sfx >/dev/null &&
	sbx exec lsrc$sfx sh -c "rm -rf /tmp && ln -s $SECRET_DIR /tmp" &&
	: "control: inside the local sandbox that planted it, the link resolves inside" &&
	expect_code 1 sbx exec lsrc$sfx cat /tmp/s 2>/dev/null &&
	sbx snapshot create lsrc$sfx --name lsnap$sfx >/dev/null &&
	sbx create $ropt --name lf$sfx --from lsnap$sfx >/dev/null &&
	{ sbx exec lf$sfx sh -c "cat /tmp/s; ls /tmp" >lo 2>&1; true; } && cat lo &&
	test_grep ! host-secret lo &&
	if [ $rt = gvisor ]; then
		sbx exec lf$sfx sh -c "echo mine >/tmp/t" && test_eq mine "$(sbx exec lf$sfx cat /tmp/t)" &&
		test ! -e "$SECRET_DIR/t"
	else
		test_eq "$SECRET_DIR" "$(sbx exec lf$sfx readlink /tmp)"
	fi &&
	sbx rm -f lf$sfx lsrc$sfx >/dev/null && sbx snapshot rm lsnap$sfx >/dev/null
'
done

test_done
