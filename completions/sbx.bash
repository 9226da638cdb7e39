# bash completion for sbx(1). Words come from the binary itself ('sbx __complete ...'),
# so new commands, options, sandboxes and providers need no change here.
# Install as /usr/share/bash-completion/completions/sbx, or source it from ~/.bashrc.

# options whose value is the next word
_sbx_value_opts=' -e --env --env-file -w --workdir -v --volume --name --label --provider --timeout -c -u --user --cpus --memory --pids-limit --ttl --ttl-action --grace --net --net-preset --add-host --host-port '

_sbx()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev='' sbx=${COMP_WORDS[0]} cmd='' i w
	local -i cmd_at=0 npos=0 dashdash=0
	COMPREPLY=()
	[ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD - 1]}
	# shellcheck disable=SC2088 # a literal ~/ typed on the command line
	[[ $sbx == '~/'* ]] && sbx=$HOME/${sbx#'~/'}

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
	case $prev in
	--provider)
		mapfile -t COMPREPLY < <(compgen -W "$("$sbx" __complete providers 2>/dev/null)" -- "$cur")
		return 0 ;;
	--ttl-action)
		mapfile -t COMPREPLY < <(compgen -W 'pause rm' -- "$cur")
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
	--env-file | -v | --volume)
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		return 0 ;;
	esac
	if [[ $_sbx_value_opts == *" $prev "* ]]; then
		return 0
	fi

	# how many arguments (not options, not option values) come before this word
	for ((i = cmd_at + 1; i < COMP_CWORD; i++)); do
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
			npos+=1
		fi
	done

	# options: before the arguments, or anywhere for commands that take them there
	if [ "$dashdash" -eq 0 ] && [[ $cur == -* ]] &&
		{ [[ " rm logs preview " == *" $cmd "* ]] || [ "$npos" -eq 0 ]; }; then
		mapfile -t COMPREPLY < <(compgen -W "$("$sbx" __complete options "$cmd" 2>/dev/null)" -- "$cur")
		return 0
	fi
	case $cmd in
	exec | inspect | logs | preview)
		[ "$dashdash" -eq 0 ] && [ "$npos" -eq 0 ] || return 0 ;;
	rm | pause | resume)
		[ "$dashdash" -eq 0 ] || return 0 ;;
	cp)
		# SB: (a sandbox name and its colon) or a host path
		local -a sbs
		mapfile -t sbs < <("$sbx" __complete sandboxes 2>/dev/null)
		compopt -o nospace -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -W "${sbs[*]/%/:}" -- "$cur"; compgen -f -- "$cur")
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
