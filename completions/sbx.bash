# bash completion for sbx(1). Words come from the binary itself ('sbx __complete ...'),
# so new commands, options, sandboxes and providers need no change here.
# Install as /usr/share/bash-completion/completions/sbx, or source it from ~/.bashrc.

# options whose value is the next word: asked of the binary once ('sbx __complete value-options')
_sbx_value_opts=''

# the word at the cursor, with the pieces COMP_WORDBREAKS split off at ':' joined again
# (tiny:1, localhost:5000/app:v2), into _sbx_word; the index of its first piece into _sbx_word_at
_sbx_colon_word()
{
	local -i j=COMP_CWORD
	_sbx_word=${COMP_WORDS[j]}
	while ((j > 1)) && { [ "${COMP_WORDS[j]}" = : ] || [ "${COMP_WORDS[j - 1]}" = : ]; }; do
		j+=-1
		_sbx_word=${COMP_WORDS[j]}$_sbx_word
	done
	_sbx_word_at=$j
}

# image names from the store that start with _sbx_word, less what readline keeps of the word
# before its last ':'
_sbx_images()
{
	local pre=''
	[[ $_sbx_word == *:* ]] && pre=${_sbx_word%"${_sbx_word##*:}"}
	mapfile -t COMPREPLY < <(compgen -W "$("$1" __complete images 2>/dev/null)" -- "$_sbx_word")
	[ ${#COMPREPLY[@]} -eq 0 ] || COMPREPLY=("${COMPREPLY[@]#"$pre"}")
}

# an argument of cp: SB: (a sandbox name and its colon) or a host path; nothing for the PATH of
# SB:PATH, which is inside the sandbox
_sbx_cp()
{
	local -a sbs files
	local f q
	[[ $_sbx_word == *:* ]] && return 0
	mapfile -t sbs < <("$1" __complete sandboxes 2>/dev/null)
	mapfile -t COMPREPLY < <(compgen -W "${sbs[*]/%/:}" -- "$_sbx_word")
	mapfile -t files < <(compgen -f -- "$_sbx_word")
	if [ ${#COMPREPLY[@]} -eq 0 ]; then
		# host paths alone: readline quotes them and ends a directory with /
		compopt -o filenames 2>/dev/null
		COMPREPLY=("${files[@]}")
		return 0
	fi
	# readline would quote the ':' of SB: as a file name's (web\:), so no -o filenames: the
	# host paths are quoted here, a directory ends with /, and no space follows SB: or DIR/
	compopt -o nospace 2>/dev/null
	for f in "${files[@]}"; do
		printf -v q %q "$f"
		[ -d "$f" ] && q+=/
		COMPREPLY+=("$q")
	done
}

_sbx()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev='' sbx=${COMP_WORDS[0]} cmd='' sub='' i w
	local -i cmd_at=0 npos=0 dashdash=0
	local _sbx_word _sbx_word_at
	COMPREPLY=()
	[ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD - 1]}
	# shellcheck disable=SC2088 # a literal ~/ typed on the command line
	[[ $sbx == '~/'* ]] && sbx=$HOME/${sbx#'~/'}
	[ -n "$_sbx_value_opts" ] ||
		_sbx_value_opts=" $("$sbx" __complete value-options 2>/dev/null | tr '\n' ' ') "

	# the command: the first word that is not a global option
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		-*) ;;
		*) cmd=${COMP_WORDS[i]} cmd_at=$i; break ;;
		esac
	done
	if [ -z "$cmd" ]; then
		if [[ $cur == -* ]]; then
			mapfile -t COMPREPLY < <(compgen -W '--debug -h --help -V --version' -- "$cur")
		else
			mapfile -t COMPREPLY < <(compgen -W "$("$sbx" __complete commands 2>/dev/null)" -- "$cur")
		fi
		return 0
	fi

	# the value of an option
	_sbx_colon_word
	if [ "$prev" = --from ]; then
		mapfile -t COMPREPLY < <(compgen -W "$("$sbx" __complete snapshots 2>/dev/null)" -- "$cur")
		return 0
	fi
	if [ "${COMP_WORDS[_sbx_word_at - 1]}" = --image ]; then
		_sbx_images "$sbx"
		return 0
	fi
	case $prev in
	--provider)
		mapfile -t COMPREPLY < <(compgen -W "$("$sbx" __complete providers 2>/dev/null)" -- "$cur")
		return 0 ;;
	--ttl-action)
		mapfile -t COMPREPLY < <(compgen -W 'pause rm' -- "$cur")
		return 0 ;;
	--sandbox)
		mapfile -t COMPREPLY < <(compgen -W "$("$sbx" __complete sandboxes 2>/dev/null)" -- "$cur")
		return 0 ;;
	--net)
		# allow= takes a list of domains after it: no space
		mapfile -t COMPREPLY < <(compgen -W 'none allow= open host' -- "$cur")
		[[ ${COMPREPLY[0]-} == *= ]] && compopt -o nospace 2>/dev/null
		return 0 ;;
	--net-preset)
		mapfile -t COMPREPLY < <(compgen -W 'default none' -- "$cur")
		return 0 ;;
	-e | --env)
		mapfile -t COMPREPLY < <(compgen -e -- "$cur")
		return 0 ;;
	--env-file | -v | --volume | -o | --output)
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		return 0 ;;
	esac
	if [[ $_sbx_value_opts == *" $prev "* ]]; then
		return 0
	fi

	# how many arguments (not options, not option values) come before this word; the first
	# of 'sbx image', 'sbx snapshot', 'sbx secret' and 'sbx provider' is its subcommand
	for ((i = cmd_at + 1; i < _sbx_word_at; i++)); do
		w=${COMP_WORDS[i]}
		if [ "$w" = -- ]; then
			dashdash=1
			break
		elif [[ $w == -* ]]; then
			[[ $_sbx_value_opts == *" $w "* ]] && ((i++))
		elif [ "$w" = = ] || [ "$w" = : ]; then
			# COMP_WORDBREAKS split allow=a.com or HOST:PORT: the rest is the same word
			((i++))
		else
			[ "$npos" -eq 0 ] && sub=$w
			npos+=1
		fi
	done

	# options: before the arguments, or anywhere for commands that take them there; 'sbx
	# image' and 'sbx provider' take them after their subcommand
	if [[ " image provider fs snapshot secret " == *" $cmd "* ]] && [ "$npos" -eq 0 ] && [[ $cur == -* ]]; then
		mapfile -t COMPREPLY < <(compgen -W '-h --help' -- "$cur")
		return 0
	fi
	if [ "$dashdash" -eq 0 ] && [[ $cur == -* ]] &&
		{ [[ " rm logs ps wait kill preview image provider fs snapshot fork secret " == *" $cmd "* ]] || [ "$npos" -eq 0 ]; }; then
		# 'sbx image pull -': pull's own options
		local -a subw=()
		[[ " image provider fs snapshot secret " == *" $cmd "* ]] && subw=("$sub")
		mapfile -t COMPREPLY < <(compgen -W "$("$sbx" __complete options "$cmd" "${subw[@]}" 2>/dev/null)" -- "$cur")
		return 0
	fi
	case $cmd in
	exec | logs | ps | wait | kill | preview)
		[ "$dashdash" -eq 0 ] && [ "$npos" -eq 0 ] || return 0 ;;
	inspect | rm | pause | resume | update | keepalive | stats)
		[ "$dashdash" -eq 0 ] || return 0 ;;
	cp)
		_sbx_cp "$sbx"
		return 0 ;;
	commit)
		# SB, then the new image's name (an existing one to replace)
		if [ "$npos" -eq 1 ]; then
			_sbx_images "$sbx"
			return 0
		fi
		[ "$npos" -eq 0 ] || return 0 ;;
	image)
		case $npos:$sub in
		0:*)
			mapfile -t COMPREPLY < <(compgen -W 'build pull import save tag ls rm prune' -- "$cur") ;;
		*:rm | *:save | 1:tag)
			_sbx_images "$sbx" ;;
		*:build)
			# CONTEXT, a directory (or -f's DOCKERFILE)
			compopt -o filenames 2>/dev/null
			mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;
		1:import)
			# FILE, or with --rootfs a directory or a tar
			compopt -o filenames 2>/dev/null
			mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;
		esac
		return 0 ;;
	fs)
		# fs SUB SB PATH...: the subcommand, then the sandbox; paths are the sandbox's
		[ "$npos" -eq 0 ] &&
			mapfile -t COMPREPLY < <(compgen -W 'read write ls stat rm mkdir mv' -- "$cur")
		[ "$npos" -eq 1 ] &&
			mapfile -t COMPREPLY < <(compgen -W "$("$sbx" __complete sandboxes 2>/dev/null)" -- "$cur")
		return 0 ;;
	provider)
		[ "$npos" -eq 0 ] && mapfile -t COMPREPLY < <(compgen -W 'ls' -- "$cur")
		return 0 ;;
	secret)
		# ls SB
		[ "$npos" -eq 0 ] && mapfile -t COMPREPLY < <(compgen -W 'ls' -- "$cur")
		[ "$npos" -eq 1 ] &&
			mapfile -t COMPREPLY < <(compgen -W "$("$sbx" __complete sandboxes 2>/dev/null)" -- "$cur")
		return 0 ;;
	snapshot)
		# create SB, ls [SB], restore SB SNAP, rm SNAP...
		case $npos:$sub in
		0:*)
			mapfile -t COMPREPLY < <(compgen -W 'create ls rm restore' -- "$cur") ;;
		1:create | 1:ls | 1:restore)
			mapfile -t COMPREPLY < <(compgen -W "$("$sbx" __complete sandboxes 2>/dev/null)" -- "$cur") ;;
		*:rm | 2:restore)
			mapfile -t COMPREPLY < <(compgen -W "$("$sbx" __complete snapshots 2>/dev/null)" -- "$cur") ;;
		esac
		return 0 ;;
	fork)
		# SRC: a sandbox or a snapshot
		[ "$npos" -eq 0 ] && mapfile -t COMPREPLY < <(compgen -W "$("$sbx" __complete sandboxes 2>/dev/null) $("$sbx" __complete snapshots 2>/dev/null)" -- "$cur")
		return 0 ;;
	help)
		[ "$npos" -eq 0 ] &&
			mapfile -t COMPREPLY < <(compgen -W "$("$sbx" __complete commands 2>/dev/null)" -- "$cur")
		return 0 ;;
	*)
		return 0 ;;
	esac
	mapfile -t COMPREPLY < <(compgen -W "$("$sbx" __complete sandboxes 2>/dev/null)" -- "$cur")
	return 0
}

complete -F _sbx sbx
