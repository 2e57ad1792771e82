"""`gpupolicy completion bash|zsh`: a completion script built from the commands' own parsers,
so it never lists an option that does not exist."""

from __future__ import annotations

import argparse
from typing import TextIO

SHELLS = ("bash", "zsh")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=SHELLS,
                        help="bash: `source <(gpupolicy completion bash)`; zsh: the same, "
                             "in ~/.zshrc (uses bashcompinit)")


def words() -> dict[str, list[str]]:
    """Command -> its option strings and choices."""
    from webhook.cli import COMMANDS, command_parser

    out: dict[str, list[str]] = {}
    for name in COMMANDS:
        found: list[str] = []
        for action in command_parser(name)._actions:
            found.extend(o for o in action.option_strings if o.startswith("--"))
            if not action.option_strings and action.choices:
                found.extend(str(c) for c in action.choices)
        out[name] = sorted(set(found))
    return out


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    table = words()
    cases = "".join(f'        {name}) opts="{" ".join(opts)}" ;;\n'
                    for name, opts in table.items())
    script = f"""# gpupolicy {args.shell} completion
_gpupolicy() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} opts
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "{' '.join(table)} --help --version" -- "$cur"))
        return
    fi
    case "${{COMP_WORDS[1]}}" in
{cases}        *) opts="" ;;
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$opts --help" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}}
"""
    if args.shell == "zsh":
        script += "autoload -U +X bashcompinit && bashcompinit\n"
    stdout.write(script + "complete -F _gpupolicy gpupolicy\n")
    return 0
