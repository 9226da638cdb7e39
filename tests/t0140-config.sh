#!/bin/bash
# A sandbox's configuration: --hostname end to end, what a provider cannot do refused before
# anything exists (for every provider), the capability table in sbx-provider(1), -h vs --hostname.
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS
: "${SBX_SRC:?SBX_SRC must point at the repository (run tests through tests/run.sh)}"

# nothing of a sandbox exists: no record, no directory, no name
no_sandbox_left() {
	local ids
	ids=$(sbx ls -q) && test -z "$ids" &&
		{ [ ! -d "$SBX_HOME/sandboxes" ] || [ -z "$(ls -A "$SBX_HOME/sandboxes")" ]; } &&
		{ [ ! -d "$SBX_HOME/names" ] || [ -z "$(ls -A "$SBX_HOME/names")" ]; }
}

# the create flag that asks for a capability (none: no create flag asks for it alone)
flag_of() {
	case $1 in
	limit-cpu) echo "--cpus 1" ;;
	limit-memory) echo "--memory 64m" ;;
	limit-pids) echo "--pids-limit 5" ;;
	disk) echo "--disk 64m" ;;
	volumes) echo "--volume /tmp:/x" ;;
	net-none) echo "--net none" ;;
	net-open) echo "--net open" ;;
	net-allow) echo "--net allow=a.test" ;;
	net-host) echo "--net host" ;;
	add-host) echo "--add-host a.test:10.0.0.5" ;;
	host-port) echo "--host-port 18080" ;;
	ttl) echo "--ttl 1m" ;;
	hostname) echo "--hostname h1" ;;
	esac
}

# every provider's capabilities, "NAME CAP" per line, from provider ls --json
caps_lines() {
	sbx provider ls --json | "$TEST_PYTHON" -c "
import json, sys
for p in json.load(sys.stdin):
    for c in p[\"capabilities\"]:
        print(p[\"name\"], c)
"
}

# the same from the table in sbx-provider(1)
man_caps_lines() {
	"$TEST_PYTHON" - "$SBX_SRC/man/sbx-provider.1.scd" <<-'EOF'
	import re, sys
	text = open(sys.argv[1]).read().split("# CAPABILITIES", 1)[1].split("\n# ", 1)[0]
	head = re.findall(r"^(?:\[\[|:<|:\[) \*(\S+)\*$", text, re.M)[1:]
	for row in re.split(r"^\|  ", text, flags=re.M)[1:]:
	    cells = [l[3:] for l in row.splitlines()[1:1 + len(head)]]
	    name = row.splitlines()[0].strip()
	    for prov, cell in zip(head, cells):
	        if cell == "yes":
	            print(prov, name)
	EOF
}

test_expect_success 'provider ls --json: each provider has its capabilities, as sbx-provider(1) tabulates them' '
	caps_lines | sort >have && test -s have &&
	man_caps_lines | sort >want && test -s want &&
	diff -u want have &&
	grep -qx "local hostname" have && ! grep -qx "e2b hostname" have
'

test_expect_success 'an option a provider cannot honour is refused (125) before any record, for every provider' '
	sbx provider ls --json | "$TEST_PYTHON" -c "import json,sys; print(\"\n\".join(p[\"name\"] for p in json.load(sys.stdin)))" >providers &&
	grep -qx e2b providers && grep -qx daytona providers &&
	caps_lines >have && n=0 &&
	while read -r p; do
		for cap in limit-cpu limit-memory limit-pids disk volumes net-none net-open net-allow \
			net-host add-host host-port ttl hostname; do
			grep -qx "$p $cap" have && continue
			f=$(flag_of "$cap") &&
			# shellcheck disable=SC2086
			expect_code 125 env E2B_API_KEY=k DAYTONA_API_KEY=k "$SBX" create --provider "$p" $f 2>e &&
			expect_one_error_line e "provider .$p. does not support ${f%% *}" &&
			no_sandbox_left || { echo "provider $p, $f"; exit 1; }
			n=$((n + 1))
		done
	done <providers &&
	test "$n" -ge 12
'

test_expect_success 'a hosted provider without its key is refused before any record; local needs none' '
	expect_code 125 env -u E2B_API_KEY "$SBX" create --provider e2b 2>e &&
	expect_one_error_line e "E2B_API_KEY is not set" && no_sandbox_left &&
	expect_code 125 env DAYTONA_API_KEY= "$SBX" create --provider daytona 2>e &&
	expect_one_error_line e "DAYTONA_API_KEY is not set" && no_sandbox_left &&
	sbx provider ls --json >p.json &&
	json_assert p.json "assert [x[\"configured\"] for x in r if x[\"name\"] == \"local\"] == [True], r"
'

test_expect_success 'control: the local provider takes every one of those options' '
	# (limits need a cgroup, which an ordinary user here has not)
	limits= && [ "$(id -u)" != 0 ] || limits="--cpus 1 --memory 64m --pids-limit 50" &&
	# shellcheck disable=SC2086
	sbx create --name all $limits --volume /tmp:/x --ttl 1h \
		--add-host a.test:10.0.0.5 --host-port "$(free_port)" --hostname h1 --net allow=a.test >/dev/null &&
	sbx inspect all >j &&
	json_assert j "
o = r[\"options\"]
assert r[\"state\"] == \"running\" and o[\"hostname\"] == \"h1\" and o[\"ttl_ms\"] == 3600000, r
assert len(o[\"volumes\"]) == 1 and len(o[\"net\"][\"host_ports\"]) == 1, r
assert o[\"net\"][\"add_hosts\"] == [{\"name\": \"a.test\", \"addr\": \"10.0.0.5\"}], r
assert o[\"net\"][\"allow\"] == [\"a.test\"] and o[\"net\"][\"preset\"] is True, r
" &&
	sbx rm -f all >/dev/null && no_sandbox_left
'

test_expect_success '--hostname: hostname, /etc/hostname, /etc/hosts and $HOSTNAME inside, kept across a release' '
	sbx create --name hn --hostname web-1.test >/dev/null &&
	test "$(sbx exec hn hostname)" = web-1.test &&
	test "$(sbx exec hn cat /etc/hostname)" = web-1.test &&
	sbx exec hn cat /etc/hosts | grep -Eq "^127\.0\.1\.1[[:space:]]+web-1\.test$" &&
	test "$(sbx exec hn -c "echo \$HOSTNAME")" = web-1.test &&
	sbx inspect hn >j && json_assert j "assert r[\"options\"][\"hostname\"] == \"web-1.test\", r" &&
	sbx pause --release hn && sbx resume hn &&
	test "$(sbx exec hn hostname)" = web-1.test &&
	sbx rm -f hn >/dev/null
'

test_expect_success 'control: without --hostname the host name is the sandbox name' '
	sbx create --name plain >/dev/null &&
	test "$(sbx exec plain hostname)" = plain &&
	sbx rm -f plain >/dev/null
'

test_expect_success 'an invalid --hostname is a usage error (125), nothing created' '
	for h in "-a" "a_b" "a..b" "$(printf "%065d" 0)"; do
		expect_code 125 sbx create --hostname="$h" 2>e &&
		head -n 1 e | grep -q "^sbx: error: invalid --hostname" && no_sandbox_left || exit 1
	done
'

test_expect_success 'create/run -h with anything else is an error naming --hostname (docker'"'"'s -h), not help' '
	for c in create run; do
		expect_code 125 sbx $c -h web 2>e >out &&
		grep -q "use --hostname NAME" e && test ! -s out && no_sandbox_left || exit 1
		expect_code 125 sbx $c --name x -h 2>e >out && grep -q -- --hostname e || exit 1
		# control: -h alone, and --help anywhere, print help and exit 0
		sbx $c -h >out && grep -q "^Usage: sbx $c" out &&
		sbx $c --help >out && grep -q -- "--hostname NAME" out || exit 1
	done &&
	no_sandbox_left
'

test_expect_success 'a create option is known to help, completion and the value-taking list from its table alone' '
	sbx create --help >h && grep -q -- "--hostname NAME" h &&
	sbx run --help >h && grep -q -- "--hostname NAME" h &&
	sbx __complete options create >o && grep -qx -- --hostname o &&
	sbx __complete options run >o && grep -qx -- --hostname o && ! grep -qx -- --json o &&
	sbx __complete value-options >v && grep -qx -- --hostname v && grep -qx -- -e v &&
	! grep -qx -- --net-allow-private v && ! grep -qx -- --json v
'

test_expect_success 'run --image of an image with no Entrypoint or Cmd: 125 naming the image, nothing left' '
	mkdir -p bare && echo hi >bare/file &&
	sbx image import --rootfs bare bare:1 >/dev/null &&
	expect_code 125 sbx run --image bare:1 2>e &&
	test_grep "^sbx: error: missing command: image .bare:1. has no Entrypoint or Cmd" e &&
	no_sandbox_left && sbx image rm bare:1 >/dev/null
'

test_done
