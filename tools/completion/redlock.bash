# bash completion for redlock(1).
#
# Installed as share/bash-completion/completions/redlock, where
# bash-completion loads it the first time `redlock` is completed; it can
# also be sourced on its own (then file names are plain, and the command
# after `exec NAME --` is completed by name only, not its arguments).
#
# The option lists mirror the option tables in tools/*.c (global and exec
# options in args.c, the others next to their commands) and tools/help.c.

_redlock_global_opts='-n --nodes -q --quorum --config --password-file --user
    --tls-ca --tls-cert --tls-key --tls-server-name --tls-insecure
    --connect-timeout --timeout --watchdog-lease -v --verbose --json -h --help'
# Options (global or of any command) that take the next word as their value.
_redlock_value_opts='-n --nodes -q --quorum --config --password-file --user
    --tls-ca --tls-cert --tls-key --tls-server-name --connect-timeout --timeout
    --watchdog-lease -w --wait --lease --on-lost --grace --unavailable-timeout
    -c --command -E --conflict-exit-code --nodes-count --base-port --dir
    --workers --seconds --replica-acks --replica-timeout --groups --permits
    --permit-count'
_redlock_commands='exec status unlock rig demo version help'

# Completes files (dirs: directories only) into COMPREPLY.
_redlock_files()
{
    if declare -F _filedir >/dev/null; then
        if [[ $1 == dirs ]]; then _filedir -d; else _filedir; fi
        return
    fi
    compopt -o filenames 2>/dev/null
    if [[ $1 == dirs ]]; then
        mapfile -t COMPREPLY < <(compgen -d -- "$cur")
    else
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    fi
}

# Drops the part of cur up to its last ':' from each reply: readline
# replaces only the text after a ':' (a word break), "redis:" -> "//".
_redlock_ltrim_colon()
{
    if declare -F __ltrim_colon_completions >/dev/null; then
        __ltrim_colon_completions "$cur"
    elif [[ $cur == *:* && $COMP_WORDBREAKS == *:* ]]; then
        local colon_word=${cur%"${cur##*:}"} i
        for i in "${!COMPREPLY[@]}"; do
            COMPREPLY[i]=${COMPREPLY[i]#"$colon_word"}
        done
    fi
}

# Completes the command that `redlock exec` runs, starting at words[$1].
_redlock_command()
{
    local i=$1
    if declare -F _command_offset >/dev/null; then
        # _command_offset counts in COMP_WORDS, where "redis://h:1" is
        # three words; words[] (from _init_completion) has them joined.
        local k=0 j=0 acc=''
        while ((k < i && j < ${#COMP_WORDS[@]})); do
            acc+=${COMP_WORDS[j++]}
            if [[ $acc == "${words[k]}" ]]; then
                k=$((k + 1))
                acc=''
            fi
        done
        _command_offset "$j"
    elif ((cword == i)); then
        mapfile -t COMPREPLY < <(compgen -c -- "$cur")
    else
        _redlock_files
    fi
}

_redlock()
{
    # split: set by _init_completion -s.
    # shellcheck disable=SC2034
    local cur prev words cword split
    COMPREPLY=()
    if declare -F _init_completion >/dev/null; then
        _init_completion -s -n : || return
    else
        # bash splits COMP_WORDS at '=' and ':' too; take whole words from
        # the line instead, and split "--opt=value" here.
        local line=${COMP_LINE:0:COMP_POINT}
        read -ra words <<<"$line"
        [[ $line == *[[:space:]] ]] && words+=('')
        cword=$((${#words[@]} - 1))
        cur=${words[cword]}
        prev=${words[cword - 1]}
        if [[ $cur == --*=* ]]; then
            prev=${cur%%=*}
            cur=${cur#*=}
        fi
    fi

    # An option's value, separate or after '='.
    case $prev in
    -q | --quorum)
        mapfile -t COMPREPLY < <(compgen -W 'all 1 2 3' -- "$cur")
        return ;;
    -n | --nodes)
        compopt -o nospace 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -W 'redis:// rediss:// unix://' -- "$cur")
        _redlock_ltrim_colon
        return ;;
    --on-lost)
        mapfile -t COMPREPLY < <(compgen -W 'term kill ignore' -- "$cur")
        return ;;
    --config | --password-file | --tls-ca | --tls-cert | --tls-key)
        _redlock_files  # --tls-ca: a file or a directory of certificates
        return ;;
    --dir)
        _redlock_files dirs
        return ;;
    -c | --command)
        mapfile -t COMPREPLY < <(compgen -c -- "$cur")
        return ;;
    -w | --wait)
        mapfile -t COMPREPLY < <(compgen -W 'forever' -- "$cur")
        return ;;
    --lease)
        mapfile -t COMPREPLY < <(compgen -W 'watchdog' -- "$cur")
        return ;;
    --user | --tls-server-name | --connect-timeout | --timeout | --watchdog-lease | \
        --grace | --unavailable-timeout | -E | \
        --conflict-exit-code | --nodes-count | --base-port | --workers | --seconds | \
        --replica-acks | --replica-timeout | --groups | --permits | --permit-count)
        return ;;  # a number or a name: nothing to offer
    esac

    # The command, its positional arguments, and where exec's CMD starts.
    local i w cmd='' npos=0 run_at=0 skip=0
    for ((i = 1; i < cword; i++)); do
        w=${words[i]}
        if ((skip)); then
            skip=0
            continue
        fi
        if [[ $cmd == exec && $w == -- ]]; then
            run_at=$((i + 1))
            break
        fi
        if [[ $w == -* ]]; then
            [[ $w != *=* && " ${_redlock_value_opts//$'\n'/ } " == *" $w "* ]] && skip=1
            # rig's --sentinel takes a value; demo's is a switch.
            [[ $cmd == rig && $w == --sentinel ]] && skip=1
            continue
        fi
        if [[ -z $cmd ]]; then
            cmd=$w
            continue
        fi
        npos=$((npos + 1))
        # "exec NAME CMD ARG...": the word after NAME starts the command.
        if [[ $cmd == exec ]] && ((npos == 2)); then
            run_at=$i
            break
        fi
    done
    if ((run_at)); then
        _redlock_command "$run_at"
        return
    fi

    local opts=$_redlock_global_opts words_=''
    case $cmd in
    '')
        if [[ $cur == -* ]]; then
            words_="$opts -V --version"
        else
            words_=$_redlock_commands
        fi ;;
    exec)
        if [[ $cur == -* ]]; then
            words_="$opts -w --wait -N --nonblock --lease --on-lost --grace
                --fencing --fair --unavailable-timeout -c --command -E
                --conflict-exit-code --keep-secret-env --replica-acks
                --replica-timeout --shared --write --fair --permits --permit-count --"
        elif ((npos == 1)); then
            # After NAME: the command to run.
            mapfile -t COMPREPLY < <(compgen -c -- "$cur")
            return
        fi ;;
    status)
        [[ $cur == -* ]] && words_="$opts --metrics --watch --count --permits" ;;
    version)
        [[ $cur == -* ]] && words_=$opts ;;
    unlock)
        if [[ $cur == -* ]]; then
            words_="$opts -f --force"
        elif ((npos == 1)); then
            words_='--force'
        fi ;;
    rig)
        if [[ $cur == -* ]]; then
            words_="$opts --nodes-count --base-port --tls --aof --dir --sentinel"
        elif ((npos == 0)); then
            words_='start stop status env'
        fi ;;
    demo)
        [[ $cur == -* ]] && words_="$opts --workers --seconds --base-port --nodes-count
            --sentinel --groups" ;;
    help)
        ((npos == 0)) && [[ $cur != -* ]] && words_=$_redlock_commands ;;
    esac
    # Lock names are the caller's own: nothing is offered for them.
    [[ -n $words_ ]] && mapfile -t COMPREPLY < <(compgen -W "$words_" -- "$cur")
    return 0
}

complete -F _redlock redlock
