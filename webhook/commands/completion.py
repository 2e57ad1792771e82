"""`gpupolicy completion bash|zsh`: a completion script built from the commands' own parsers,
so it never lists an option that does not exist.

It completes every command and sub-command (`policy check`, `certs generate`), every option,
the fixed values of an option (`-o` formats, `--color`, `--log-level`) and of a positional
(`completion bash|zsh`), and paths where a path goes: names with spaces come back escaped,
directories with a trailing `/` so the next level completes at once.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from typing import TextIO

from webhook.commands import options

SHELLS = ("bash", "zsh")
PATH = "@path"  # a value that is a file or directory
# metavars that name a file or directory, and value-taking options whose dest is a directory
_PATHLIKE = re.compile(r"FILE|PATH|DIR|\.yaml")
_DIR_DESTS = ("_dir", "out")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=SHELLS,
                        help="bash: `source <(gpupolicy completion bash)`; zsh: the same, "
                             "in ~/.zshrc (uses bashcompinit)")


@dataclass
class Spec:
    """What one command (or sub-command) takes."""

    options: list[str] = field(default_factory=list)
    # option -> its fixed values, or (PATH,) for a path; absent: a flag or a free value
    values: dict[str, tuple[str, ...]] = field(default_factory=dict)
    takes_value: set[str] = field(default_factory=set)
    positional: tuple[str, ...] = ()  # fixed values, (PATH,), or () for nothing to offer
    subcommands: dict[str, Spec] = field(default_factory=dict)


def spec_of(parser: argparse.ArgumentParser) -> Spec:
    spec = Spec()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            spec.subcommands = {name: spec_of(sub) for name, sub in action.choices.items()}
            continue
        kinds = _values(action)
        if not action.option_strings:
            spec.positional = spec.positional or kinds
            continue
        spec.options.extend(action.option_strings)
        if action.nargs != 0:
            spec.takes_value.update(action.option_strings)
            if kinds:
                spec.values.update(dict.fromkeys(action.option_strings, kinds))
    return spec


def _values(action: argparse.Action) -> tuple[str, ...]:
    formats = options.format_choices(action)
    if formats:
        return formats
    if action.choices:
        return tuple(str(c) for c in action.choices)
    if action.nargs == 0:
        return ()
    metavar = str(action.metavar or "")
    if _PATHLIKE.search(metavar) or action.dest.endswith(_DIR_DESTS) or (
            not action.option_strings and action.dest in ("paths", "file", "target")):
        return (PATH,)
    return ()


def specs() -> dict[str, Spec]:
    from webhook.cli import COMMANDS, command_parser

    return {name: spec_of(command_parser(name)) for name in COMMANDS}


def _words(values: tuple[str, ...]) -> str:
    return " ".join(values)


def _case_for(path: str, spec: Spec) -> str:
    """One `case` arm: what to offer after `gpupolicy PATH` given the previous word."""
    lines = [f'        "{path}")']
    if spec.subcommands:
        lines.append(f'            _gpupolicy_words "{_words(tuple(spec.subcommands))} --help"'
                     "; return ;;")
        return "\n".join(lines)
    by_values: dict[tuple[str, ...], list[str]] = {}
    for option, values in spec.values.items():
        by_values.setdefault(values, []).append(option)
    free = sorted(spec.takes_value - set(spec.values))
    arms = [(opts, values) for values, opts in by_values.items()]
    if arms or free:
        lines.append('            case "$prev" in')
        for names, values in arms:
            action = ("_gpupolicy_paths" if values == (PATH,)
                      else f'_gpupolicy_words "{_words(values)}"')
            lines.append(f"                {'|'.join(names)}) {action}; return ;;")
        if free:  # a value of the user's own (a namespace, a number): nothing to offer
            lines.append(f"                {'|'.join(free)}) return ;;")
        lines.append("            esac")
    opts = " ".join(sorted(set(spec.options)))
    lines.append(f'            opts="{opts}"')
    positional = ("_gpupolicy_paths" if spec.positional == (PATH,)
                  else f'_gpupolicy_words "{_words(spec.positional)}"' if spec.positional
                  else ":")
    lines.append(f'            if [[ "$cur" == -* ]]; then _gpupolicy_words "$opts"; '
                 f"else {positional}; fi ;;")
    return "\n".join(lines)


def script(shell: str) -> str:
    table = specs()
    arms = []
    for name, spec in table.items():
        arms.append(_case_for(name, spec))
        for sub, sub_spec in spec.subcommands.items():
            arms.append(_case_for(f"{name} {sub}", sub_spec))
    nested = " ".join(name for name, spec in table.items() if spec.subcommands)
    body = "\n".join(arms)
    text = f"""# gpupolicy {shell} completion: source <(gpupolicy completion {shell})
_gpupolicy_words() {{
    local IFS=$' \\t\\n'
    COMPREPLY=($(compgen -W "$1" -- "$cur"))
}}
_gpupolicy_paths() {{
    # paths as the shell must read them back: spaces escaped, a directory with its `/`
    local IFS=$'\\n' found unescaped="${{cur//\\\\ / }}"
    COMPREPLY=()
    for found in $(compgen -f -- "$unescaped"); do
        [ -d "$found" ] && found="$found/"
        COMPREPLY+=("$(printf '%q' "$found" | sed 's/\\\\~/~/')")
    done
    if [ ${{#COMPREPLY[@]}} -eq 1 ] && [[ "${{COMPREPLY[0]}}" == */ ]]; then
        type compopt >/dev/null 2>&1 && compopt -o nospace 2>/dev/null
    fi
}}
_gpupolicy() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}" opts cmd
    if [ "$COMP_CWORD" -eq 1 ]; then
        _gpupolicy_words "{_words(tuple(table))} --help --version"
        return
    fi
    cmd="${{COMP_WORDS[1]}}"
    case " {nested} " in
        *" $cmd "*) [ "$COMP_CWORD" -gt 2 ] && cmd="$cmd ${{COMP_WORDS[2]}}" ;;
    esac
    case "$cmd" in
{body}
        *) COMPREPLY=() ;;
    esac
}}
"""
    if shell == "zsh":
        text += "autoload -U +X bashcompinit && bashcompinit\n"
    return text + "complete -F _gpupolicy gpupolicy\n"


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    stdout.write(script(args.shell))
    return 0
