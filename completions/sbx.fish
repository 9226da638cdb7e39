# fish completion for sbx(1). Words come from the binary itself ('sbx __complete ...'),
# so new commands, options, sandboxes and providers need no change here.
# Install as sbx.fish in a directory of $fish_complete_path (e.g. /usr/share/fish/vendor_completions.d).

# options whose value is the next word, asked of the binary once
set -g __sbx_value_opts (command sbx __complete value-options 2>/dev/null)

# the command: the first word after 'sbx' that is not a global option
function __sbx_cmd
    for t in (commandline -opc)[2..-1]
        if not string match -q -- '-*' $t
            echo $t
            return 0
        end
    end
    return 1
end

# the arguments (not options, not option values) after the command, up to the cursor;
# fails once '--' was given
function __sbx_args
    set -l tokens (commandline -opc)
    set -l seen_cmd 0
    set -l skip 0
    for t in $tokens[2..-1]
        if test $skip = 1
            set skip 0
        else if test $seen_cmd = 0
            string match -q -- '-*' $t; or set seen_cmd 1
        else if test "$t" = --
            return 1
        else if contains -- $t $__sbx_value_opts
            set skip 1
        else if not string match -q -- '-*' $t
            echo $t
        end
    end
    return 0
end

function __sbx_options
    set -l cmd (__sbx_cmd); or return
    set -l args (__sbx_args); or return
    # options: before the arguments, or anywhere for commands that take them there; 'sbx
    # image' and 'sbx provider' take them after their subcommand
    if contains -- $cmd image provider fs snapshot secret; and test (count $args) -eq 0
        printf '%s\n' -h --help
    else if contains -- $cmd image provider fs snapshot secret
        # 'sbx image pull -': pull's own options
        sbx __complete options $cmd $args[1] 2>/dev/null
    else if test (count $args) -eq 0; or contains -- $cmd rm logs ps wait kill preview fork
        sbx __complete options $cmd 2>/dev/null
    end
end

# 'sbx CMD SUB ...' (image, provider): true when the first argument is SUB ("": whatever it is)
# and, when counts follow, the arguments so far number one of them
function __sbx_sub_at
    test "$(__sbx_cmd)" = $argv[1]; or return 1
    contains -- (commandline -opc)[-1] $__sbx_value_opts; and return 1
    set -l args (__sbx_args); or return 1
    if test -n "$argv[2]"
        test (count $args) -gt 0; and test "$args[1]" = "$argv[2]"; or return 1
    end
    test (count $argv) -eq 2; or contains -- (count $args) $argv[3..-1]
end

# SB wanted here: exec, logs, ps, wait, kill and preview take one, inspect, rm, pause, resume, update, keepalive and stats any number
function __sbx_wants_sandbox
    set -l cmd (__sbx_cmd); or return 1
    set -l args (__sbx_args); or return 1
    contains -- (commandline -opc)[-1] $__sbx_value_opts; and return 1
    switch $cmd
        case exec logs ps wait kill preview commit
            test (count $args) -eq 0
        case inspect rm pause resume update keepalive stats
            return 0
        case '*'
            return 1
    end
end

function __sbx_prev_is
    contains -- (commandline -opc)[-1] $argv
end

complete -c sbx -f
complete -c sbx -n 'not __sbx_cmd' -l debug -d 'Print debug messages'
complete -c sbx -n 'not __sbx_cmd' -s h -l help -d 'Show help'
complete -c sbx -n 'not __sbx_cmd' -s V -l version -d 'Show the version'
complete -c sbx -n 'not __sbx_cmd' -a '(sbx __complete commands 2>/dev/null)'
complete -c sbx -n '__sbx_cmd; and string match -q -- "-*" (commandline -ct)' -a '(__sbx_options)'
complete -c sbx -n '__sbx_wants_sandbox' -a '(sbx __complete sandboxes 2>/dev/null)'
complete -c sbx -n 'test "$(__sbx_cmd)" = help; and test (count (__sbx_args)) -eq 0' -a '(sbx __complete commands 2>/dev/null)'
# cp: SB: or a host path; nothing for the PATH of SB:PATH, which is inside the sandbox
complete -c sbx -n 'test "$(__sbx_cmd)" = cp; and not string match -q -- "-*" (commandline -ct); and not string match -q -- "*:*" (commandline -ct)' -F -a '(for s in (sbx __complete sandboxes 2>/dev/null); echo $s:; end)'
complete -c sbx -n '__sbx_cmd; and __sbx_prev_is --provider' -a '(sbx __complete providers 2>/dev/null)'
complete -c sbx -n '__sbx_cmd; and __sbx_prev_is --image' -a '(sbx __complete images 2>/dev/null)'
complete -c sbx -n '__sbx_cmd; and __sbx_prev_is --sandbox' -a '(sbx __complete sandboxes 2>/dev/null)'
complete -c sbx -n '__sbx_sub_at image "" 0; and not string match -q -- "-*" (commandline -ct)' -a 'build pull import save tag ls rm prune'
complete -c sbx -n '__sbx_sub_at image rm; and not string match -q -- "-*" (commandline -ct)' -a '(sbx __complete images 2>/dev/null)'
complete -c sbx -n '__sbx_sub_at image save; and not string match -q -- "-*" (commandline -ct); and not __sbx_prev_is -o --output' -a '(sbx __complete images 2>/dev/null)'
complete -c sbx -n '__sbx_sub_at image save; and __sbx_prev_is -o --output' -F
complete -c sbx -n '__sbx_sub_at image tag 1; and not string match -q -- "-*" (commandline -ct)' -a '(sbx __complete images 2>/dev/null)'
complete -c sbx -n '__sbx_sub_at image import 1; and not string match -q -- "-*" (commandline -ct)' -F
complete -c sbx -n '__sbx_sub_at image build; and not string match -q -- "-*" (commandline -ct)' -F
complete -c sbx -n '__sbx_sub_at fs "" 0; and not string match -q -- "-*" (commandline -ct)' -a 'read write ls stat rm mkdir mv'
complete -c sbx -n '__sbx_sub_at fs "" 1; and not string match -q -- "-*" (commandline -ct)' -a '(sbx __complete sandboxes 2>/dev/null)'
complete -c sbx -n '__sbx_sub_at provider "" 0; and not string match -q -- "-*" (commandline -ct)' -a 'ls'
complete -c sbx -n '__sbx_sub_at secret "" 0; and not string match -q -- "-*" (commandline -ct)' -a 'ls'
complete -c sbx -n '__sbx_sub_at secret ls 1; and not string match -q -- "-*" (commandline -ct)' -a '(sbx __complete sandboxes 2>/dev/null)'
# snapshot create SB, ls [SB], restore SB SNAP, rm SNAP...; fork SRC (a sandbox or a snapshot)
complete -c sbx -n '__sbx_sub_at snapshot "" 0; and not string match -q -- "-*" (commandline -ct)' -a 'create ls rm restore'
complete -c sbx -n '__sbx_sub_at snapshot create 1; or __sbx_sub_at snapshot ls 1; or __sbx_sub_at snapshot restore 1' -a '(sbx __complete sandboxes 2>/dev/null)'
complete -c sbx -n '__sbx_sub_at snapshot rm; or __sbx_sub_at snapshot restore 2' -a '(sbx __complete snapshots 2>/dev/null)'
complete -c sbx -n 'test "$(__sbx_cmd)" = fork; and test (count (__sbx_args)) -eq 0; and not string match -q -- "-*" (commandline -ct)' -a '(sbx __complete sandboxes 2>/dev/null; sbx __complete snapshots 2>/dev/null)'
complete -c sbx -n '__sbx_cmd; and __sbx_prev_is --from' -a '(sbx __complete snapshots 2>/dev/null)'
complete -c sbx -n '__sbx_cmd; and __sbx_prev_is --ttl-action' -a 'pause rm'
complete -c sbx -n '__sbx_cmd; and __sbx_prev_is --net' -a 'none allow= open host'
complete -c sbx -n '__sbx_cmd; and __sbx_prev_is --net-preset' -a 'default none'
complete -c sbx -n '__sbx_cmd; and __sbx_prev_is --net-rate' -a 'none 50r/s 600r/m 10MiB/s'
complete -c sbx -n '__sbx_cmd; and __sbx_prev_is -e --env' -a '(set -nx)'
complete -c sbx -n '__sbx_cmd; and __sbx_prev_is --env-file -v --volume' -F
