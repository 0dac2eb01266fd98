# bash completion for ctxguard.  The options and their values come from the
# command's own --help, so they never fall behind it: an argument written
# a|b|c completes to its words, FILE or PATH to file names; after "--" the
# program and its arguments complete as commands do.
_ctxguard()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]} i
	COMPREPLY=()
	for ((i = 1; i < COMP_CWORD; i++)); do
		if [[ ${COMP_WORDS[i]} == -- ]]; then
			if declare -F _command_offset >/dev/null; then
				_command_offset $((i + 1))
			else
				COMPREPLY=($(compgen -c -- "$cur"))
			fi
			return
		fi
	done
	local help
	help=$("${COMP_WORDS[0]}" --help 2>/dev/null) || return
	# bash splits --opt=value at '=' (COMP_WORDBREAKS): prev is then "="
	if [[ $prev == = && COMP_CWORD -ge 2 ]]; then
		prev=${COMP_WORDS[COMP_CWORD - 2]}
	fi
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "-- $(awk '$1 ~ /^--/ {print $1}' <<<"$help")" -- "$cur"))
		return
	fi
	local arg
	arg=$(awk -v o="$prev" '$1 == o && NF > 1 {print $2; exit}' <<<"$help")
	case $arg in
	"") COMPREPLY=($(compgen -W "--" -- "$cur")) ;;
	*[A-Z]*) COMPREPLY=($(compgen -f -- "$cur")) ;;
	*) COMPREPLY=($(compgen -W "${arg//|/ }" -- "$cur")) ;;
	esac
}
complete -F _ctxguard ctxguard ctxguard-cuda
