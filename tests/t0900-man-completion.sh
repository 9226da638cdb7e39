#!/bin/bash
# Man pages and shell completions against the binary: every visible command has a page whose
# SYNOPSIS is its usage, committed pages are up to date, completions ask the binary.
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies, which call the helpers
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"

: "${SBX_SRC:?SBX_SRC must point at the repository (run tests through tests/run.sh)}"
export MAN=$SBX_SRC/man COMP=$SBX_SRC/completions

# the visible commands, one per line
commands() { sbx __complete commands; }

# the usage line(s) of 'sbx CMD --help', without "Usage: " and the continuation indent
help_usage() {
	sbx "$1" --help | sed -n -e '/^Usage: /,/^$/p' | sed -e '/^$/d' -e 's/^Usage: //' \
		-e 's/^ *//'
}

# the SYNOPSIS lines of a scdoc page, formatting removed: '*' marks, '++' breaks, '\' escapes
scd_synopsis() {
	sed -n -e '/^# SYNOPSIS/,/^# /p' "$1" | sed -e '1d' -e '/^# /d' -e '/^[[:space:]]*$/d' \
		-e 's/++$//' -e 's/\([^\\]\)\*/\1/g' -e 's/^\*//' -e 's/\\\(.\)/\1/g'
}

# the options a command's --help lists (-x and --long), one per line
help_options() {
	sbx "$1" --help | grep -E '^ +-' | sed -E 's/^ +//; s/ {2,}.*//; s/[, ]+/\n/g' |
		grep -E '^(-[a-zA-Z]|--[a-z][a-z0-9-]*)$'
}

# the item lines of a scdoc page's OPTIONS section, such as "*-e*, *--env* _K=V_"
scd_option_items() { sed -n -e '/^# OPTIONS/,/^# /p' "$1" | grep -E '^\*-'; }

# a generated page less the lines that vary: .TH holds the build date, .\" the scdoc version
strip_generated() { grep -v -e '^\.TH ' -e '^\.\\"' "$1"; }

test_expect_success 'sbx __complete commands lists the visible commands only' '
	commands >cmds &&
	test_grep -x create cmds && test_grep -x exec cmds && test_grep -x rm cmds &&
	test_grep ! "^__" cmds &&
	sbx --help | sed -n "/^Commands:/,/^$/p" | awk "NF > 1 { print \$1 }" >from_help &&
	test -s from_help && diff from_help cmds
'

test_expect_success 'every command has a man page source and a generated page' '
	test -f "$MAN/sbx.1.scd" && test -f "$MAN/sbx.1" &&
	commands >cmds && test -s cmds &&
	while read -r c; do
		test -f "$MAN/sbx-$c.1.scd" || { echo "missing man/sbx-$c.1.scd"; exit 1; }
		test -f "$MAN/sbx-$c.1" || { echo "missing man/sbx-$c.1"; exit 1; }
		test_grep -x "sbx-$c(1)" "$MAN/sbx-$c.1.scd" || { echo "bad header in sbx-$c.1.scd"; exit 1; }
	done <cmds
'

if command -v scdoc >/dev/null; then
	test_expect_success 'generated man pages are up to date with their scdoc sources' '
		n=0 &&
		for src in "$MAN"/*.1.scd; do
			page=${src%.scd} &&
			scdoc <"$src" >"$TRASH/gen.1" &&
			strip_generated "$TRASH/gen.1" >gen &&
			strip_generated "$page" >committed &&
			{ diff -u committed gen || { echo "stale: ${page#$SBX_SRC/} (run scdoc)"; exit 1; }; } &&
			n=$((n + 1)) || exit 1
		done &&
		test "$n" -gt "$(commands | wc -l)"
	'
else
	test_skip 'generated man pages are up to date with their scdoc sources' 'scdoc missing'
fi

test_expect_success 'each page has NAME, SYNOPSIS, DESCRIPTION, OPTIONS, EXAMPLES, EXIT STATUS, SEE ALSO' '
	for c in $(commands); do
		for s in NAME SYNOPSIS DESCRIPTION OPTIONS EXAMPLES "EXIT STATUS" "SEE ALSO"; do
			test_grep -x "# $s" "$MAN/sbx-$c.1.scd" || { echo "sbx-$c.1.scd: no $s"; exit 1; }
		done
		test_grep "^sbx-$c - " "$MAN/sbx-$c.1.scd" || { echo "sbx-$c.1.scd: bad NAME"; exit 1; }
	done
'

test_expect_success 'each SYNOPSIS is the usage printed by sbx CMD --help' '
	for c in $(commands); do
		help_usage "$c" >want && test -s want &&
		scd_synopsis "$MAN/sbx-$c.1.scd" >got &&
		{ diff -u want got || { echo "sbx-$c.1.scd: SYNOPSIS differs from --help"; exit 1; }; } ||
		exit 1
	done
'

test_expect_success 'each page documents every option its --help lists' '
	for c in $(commands); do
		help_options "$c" >opts && test_grep -x -- --help opts &&
		scd_option_items "$MAN/sbx-$c.1.scd" >items &&
		while read -r o; do
			test_grep -F -- "*$o*" items ||
				{ echo "sbx-$c.1.scd: option $o not in OPTIONS"; exit 1; }
		done <opts || exit 1
	done
'

test_expect_success 'sbx.1: synopsis, global options, commands, files, environment, exit status' '
	f=$MAN/sbx.1.scd &&
	sbx --help | sed -n "s/^Usage: //p" >want &&
	scd_synopsis "$f" | head -n 1 >got && diff -u want got &&
	scd_option_items "$f" >items &&
	for o in --debug -h --help -V --version; do test_grep -F -- "*$o*" items || exit 1; done &&
	for s in NAME SYNOPSIS DESCRIPTION OPTIONS COMMANDS FILES ENVIRONMENT "EXIT STATUS" \
		"SEE ALSO"; do
		test_grep -x "# $s" "$f" || { echo "sbx.1.scd: no $s"; exit 1; }
	done &&
	for c in $(commands); do
		test_grep -x "\*$c\*" "$f" || { echo "sbx.1.scd: command $c not listed"; exit 1; }
		test_grep -F "*sbx-$c*(1)" "$f" || { echo "sbx.1.scd: no reference to sbx-$c(1)"; exit 1; }
	done &&
	for w in SBX_HOME SBX_DEBUG sandbox.json names/ "*125*" "*126*" "*127*" "*124*"; do
		test_grep -F -- "$w" "$f" || { echo "sbx.1.scd: $w not mentioned"; exit 1; }
	done
'

test_expect_success 'sbx __complete options CMD offers every option of sbx CMD --help' '
	for c in $(commands); do
		help_options "$c" >opts && test -s opts &&
		sbx __complete options "$c" >offered &&
		while read -r o; do
			test_grep -x -- "$o" offered ||
				{ echo "sbx __complete options $c: $o missing"; exit 1; }
		done <opts || exit 1
	done &&
	sbx __complete options create | test_grep -x -- --provider &&
	sbx __complete providers | test_grep -x local
'

# complete LINE...: the words the bash completion offers for "LINE" (last word = the cursor's)
bash_complete() {
	mkdir -p "$TRASH/bin" && ln -sf "$SBX" "$TRASH/bin/sbx" &&
	PATH="$TRASH/bin:$PATH" bash --norc --noprofile -c '
		. "$1" || exit 1
		shift
		COMP_WORDS=("$@")
		COMP_CWORD=$(($# - 1))
		COMPREPLY=()
		_sbx || exit 1
		[ ${#COMPREPLY[@]} -eq 0 ] || printf "%s\n" "${COMPREPLY[@]}"
	' bash "$COMP/sbx.bash" "$@"
}

test_expect_success 'bash completion loads and registers _sbx for sbx' '
	bash --norc --noprofile -c ". \"$COMP/sbx.bash\" && complete -p sbx" >out 2>err &&
	test ! -s err && test_grep -- "-F _sbx sbx" out
'

test_expect_success 'bash completion completes commands and options from the binary' '
	bash_complete sbx ex >out && echo exec >want && diff -u want out &&
	bash_complete sbx "" >out && commands >want && diff -u want out &&
	bash_complete sbx --debug "in" >out && echo inspect >want && diff -u want out &&
	bash_complete sbx exec --ti >out && echo --timeout >want && diff -u want out &&
	bash_complete sbx create --provider "" >out && sbx __complete providers >want &&
	diff -u want out &&
	bash_complete sbx help ver >out && echo version >want && diff -u want out &&
	bash_complete sbx ls - >out && sbx __complete options ls >want && diff -u want out
'

if test_have_prereq USERNS; then
	test_expect_success 'bash completion completes live sandbox names for exec, inspect, rm' '
		sbx create --name t0900box >id &&
		bash_complete sbx exec t09 >out && echo t0900box >want && diff -u want out &&
		bash_complete sbx inspect t0900 >out && diff -u want out &&
		bash_complete sbx rm -f t09 >out && diff -u want out &&
		bash_complete sbx exec t0900box "" >out && test ! -s out &&
		sbx rm -f t0900box >/dev/null &&
		bash_complete sbx exec t09 >out && test ! -s out
	'
else
	test_skip 'bash completion completes live sandbox names for exec, inspect, rm' \
		'needs user namespaces'
fi

test_expect_success 'bash completion completes image subcommands and the names in the image store' '
	bash_complete sbx image "" >out && printf "%s\n" build pull import save tag ls rm prune >want &&
	diff -u want out &&
	bash_complete sbx image pull --pl >out && echo --platform >want && diff -u want out &&
	sbx __complete images >out && test ! -s out &&
	test ! -d "$SBX_HOME/images" &&
	mkdir -p rootfs/etc && echo x >rootfs/etc/x &&
	sbx image import --rootfs rootfs t0900img:1 >/dev/null &&
	sbx __complete images >out && echo t0900img:1 >want && diff -u want out &&
	bash_complete sbx image rm t09 >out && diff -u want out &&
	bash_complete sbx image rm -f t0900img:1 "" >out && diff -u want out &&
	bash_complete sbx create --image "" >out && diff -u want out &&
	bash_complete sbx run --name x --image t0900img : "" >out && echo 1 >want &&
	diff -u want out &&
	bash_complete sbx image import --rootfs rootfs "" >out && test ! -s out
'

test_expect_success 'zsh and fish completions ask the binary for commands, options, sandboxes' '
	head -n 1 "$COMP/_sbx" | test_grep -x "#compdef sbx" &&
	test_grep "complete -c sbx" "$COMP/sbx.fish" &&
	for f in "$COMP/_sbx" "$COMP/sbx.fish" "$COMP/sbx.bash"; do
		for w in "__complete commands" "__complete options" "__complete sandboxes" \
			"__complete providers" "__complete images"; do
			test_grep "$w" "$f" || { echo "$f: does not use $w"; exit 1; }
		done
	done
'

if command -v zsh >/dev/null; then
	test_expect_success 'zsh completion parses' 'zsh -n "$COMP/_sbx"'
else
	test_skip 'zsh completion parses' 'zsh missing'
fi

if command -v fish >/dev/null; then
	test_expect_success 'fish completion parses and completes commands and options' '
		fish -n "$COMP/sbx.fish" &&
		mkdir -p "$TRASH/bin" && ln -sf "$SBX" "$TRASH/bin/sbx" &&
		PATH="$TRASH/bin:$PATH" fish --no-config -c "source \"$COMP/sbx.fish\"; \
			complete -C \"sbx ex\"; complete -C \"sbx exec --ti\"; \
			complete -C \"sbx image p\"" >out &&
		test_grep "^exec" out && test_grep "^--timeout" out && test_grep "^pull" out &&
		test_grep "^prune" out
	'
else
	test_skip 'fish completion parses and completes commands and options' 'fish missing'
fi

if command -v man >/dev/null; then
	test_expect_success 'man -l renders every page without a warning' '
		warn= &&
		{ ! man --help 2>&1 | grep -q -- --warnings || warn=--warnings; } &&
		for page in "$MAN"/*.1; do
			MANWIDTH=80 man $warn -l "$page" >out 2>err </dev/null ||
				{ echo "man -l $page failed"; cat err; exit 1; }
			test ! -s err || { echo "man -l $page:"; cat err; exit 1; }
			test_grep "^SYNOPSIS" out || { echo "$page: no SYNOPSIS rendered"; exit 1; }
		done
	'
else
	test_skip 'man -l renders every page without a warning' 'man missing'
fi

test_expect_success 'sbx __complete options image SUB: that subcommand'"'"'s options only' '
	sbx __complete options image pull >out &&
	printf "%s\n" --platform --insecure -q --quiet -h --help >want && diff -u want out &&
	sbx __complete options image import >out &&
	printf "%s\n" --rootfs --name -h --help >want && diff -u want out &&
	sbx __complete options image save >out &&
	printf "%s\n" -o --output -h --help >want && diff -u want out &&
	sbx __complete options image ls >out &&
	printf "%s\n" -q --quiet --json -h --help >want && diff -u want out &&
	sbx __complete options image list >out2 && diff -u want out2 &&
	sbx __complete options image rm >out &&
	printf "%s\n" -f --force -h --help >want && diff -u want out &&
	sbx __complete options image prune >out && printf "%s\n" -h --help >want &&
	diff -u want out &&
	sbx __complete options provider ls >out && printf "%s\n" --json -h --help >want &&
	diff -u want out &&
	sbx __complete options image >all && sbx __complete options image nosuch >out &&
	diff -u all out && grep -qx -- --rootfs all && grep -qx -- --force all
'

# zsh_complete LINE...: what _sbx hands compadd for "LINE" (last word = the cursor's), with
# compadd, _call_program and _files stubbed: only a completion widget may call the real ones
zsh_complete() {
	mkdir -p "$TRASH/bin" && ln -sf "$SBX" "$TRASH/bin/sbx" &&
	PATH="$TRASH/bin:$PATH" zsh -f -c '
		compadd() { print -r -- "compadd $*"; }
		_call_program() { shift; "$@"; }
		_files() { print -r -- _files; }
		compdef() { :; }
		source "$1" || exit 1
		shift
		words=("$@")
		CURRENT=$#
		PREFIX=${words[-1]}
		_sbx
	' zsh "$COMP/_sbx" "$@"
}

test_expect_success 'bash, zsh and fish completions offer image pull only its own options' '
	bash_complete sbx image pull - >out &&
	sbx __complete options image pull >want && diff -u want out &&
	bash_complete sbx image pull --platform linux/arm64 -- >out &&
	printf "%s\n" --platform --insecure --quiet --help >want && diff -u want out &&
	bash_complete sbx image ls -- >out &&
	printf "%s\n" --quiet --json --help >want && diff -u want out &&
	bash_complete sbx provider ls -- >out &&
	printf "%s\n" --json --help >want && diff -u want out &&
	if command -v zsh >/dev/null; then
		zsh_complete sbx image pull -- >out &&
		echo "compadd -- --platform --insecure -q --quiet -h --help" >want &&
		diff -u want out
	fi &&
	if command -v fish >/dev/null; then
		PATH="$TRASH/bin:$PATH" fish --no-config -c "source \"$COMP/sbx.fish\"; \
			complete -C \"sbx image pull -\"" >out &&
		grep -q "^--platform" out && ! grep -q -e "^--rootfs" -e "^--json" -e "^--force" out
	fi
'

# bash_complete_opts LINE...: as bash_complete, and the compopt calls go to the file compopt
bash_complete_opts() {
	: >"$TRASH/compopt" &&
	PATH="$TRASH/bin:$PATH" bash --norc --noprofile -c '
		compopt() { echo "$*" >>"$TRASH/compopt"; }
		. "$1" || exit 1
		shift
		COMP_WORDS=("$@")
		COMP_CWORD=$(($# - 1))
		COMPREPLY=()
		_sbx || exit 1
		[ ${#COMPREPLY[@]} -eq 0 ] || printf "%s\n" "${COMPREPLY[@]}"
	' bash "$COMP/sbx.bash" "$@"
}

if test_have_prereq USERNS; then
	test_expect_success 'bash completion of cp: SB: unescaped, host paths quoted, nothing after SB:' '
		export TRASH &&
		sbx create --name t0900cp >/dev/null && mkdir t0900dir && : >"t0900 file" &&
		bash_complete_opts sbx cp t0900 >out && sort out >sorted &&
		printf "%s\n" "t0900\\ file" t0900cp: t0900dir/ >want && diff -u want sorted &&
		! grep -q filenames compopt && grep -qx -- "-o nospace" compopt &&
		bash_complete_opts sbx cp t0900c >out && echo t0900cp: >want && diff -u want out &&
		bash_complete_opts sbx cp t0900cp : "" >out && test ! -s out &&
		bash_complete_opts sbx cp t0900cp : /tm >out && test ! -s out &&
		bash_complete_opts sbx cp t0900cp : /tmp/x t0900cp >out && echo t0900cp: >want &&
		diff -u want out &&
		bash_complete_opts sbx cp "t0900 f" >out && echo "t0900 file" >want &&
		diff -u want out && grep -qx -- "-o filenames" compopt &&
		sbx rm -f t0900cp >/dev/null
	'

	test_expect_success 'fish completion of cp: SB: or host paths, nothing after SB:' '
		test_have_prereq fish || exit 0
		sbx create --name t0900fc >/dev/null && mkdir fc && cd fc && : >t0900host &&
		PATH="$TRASH/bin:$PATH" fish --no-config -c "source \"$COMP/sbx.fish\"; \
			complete -C \"sbx cp t0900\"" >out &&
		sort out >got && printf "%s\n" t0900fc: t0900host >want && diff -u want got &&
		PATH="$TRASH/bin:$PATH" fish --no-config -c "source \"$COMP/sbx.fish\"; \
			complete -C \"sbx cp t0900fc:/t\"" >out && test ! -s out &&
		sbx rm -f t0900fc >/dev/null
	'

	test_expect_success 'inspect completes one sandbox after another' '
		sbx create --name t0900i1 >/dev/null && sbx create --name t0900i2 >/dev/null &&
		bash_complete sbx inspect t0900i1 t0900i >out && sort out >sorted &&
		printf "%s\n" t0900i1 t0900i2 >want && diff -u want sorted &&
		bash_complete sbx inspect --json t0900i1 t0900i2 t0900 >out && sort out >sorted &&
		diff -u want sorted &&
		sbx rm -f t0900i1 t0900i2 >/dev/null
	'
else
	test_skip 'bash completion of cp: SB: unescaped, host paths quoted, nothing after SB:' \
		'needs user namespaces'
	test_skip 'fish completion of cp: SB: or host paths, nothing after SB:' \
		'needs user namespaces'
	test_skip 'inspect completes one sandbox after another' 'needs user namespaces'
fi

test_expect_success 'image --help shows import from stdin; preview --help names every JSON key' '
	sbx image --help >out && grep -q "^       sbx image import \[--name NAME\[:TAG\]\] FILE|-$" out &&
	grep -qF "*sbx image import* [--name NAME[:TAG]] FILE|-++" "$MAN/sbx-image.1.scd" &&
	sbx preview --help >out &&
	for k in url port host_port public auth token; do
		tr -s " \n" " " <out | grep -q "{[a-z_, ]*\<$k\>[a-z_, ]*}" ||
			{ echo "preview --help: no $k"; exit 1; }
		sed -n "/^\*--json\*/,/^$/p" "$MAN/sbx-preview.1.scd" | grep -q "\*$k\*" ||
			{ echo "sbx-preview.1.scd --json: no $k"; exit 1; }
	done
'

test_done
