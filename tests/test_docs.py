"""The README and docs/ document what the code has: every rule (docs/rules.md is generated from
the rule modules and kept current here), the two set-up commands, and every `gpupolicy`
command they show, parsed by the real command-line parser (options that exist, values of the
right kind). The commands are parsed, not run: they name clusters and files a reader has."""

from __future__ import annotations

import contextlib
import functools
import io
import re
import shlex
from pathlib import Path

import pytest

from policies.loading import parse_policies
from policies.rules import OTHER_RULE_IDS, RULES
from tests.docs import DOCS, README, ROOT, documented, pages
from webhook import cli
from webhook.output.report import help_uri

README_TEXT = README.read_text(encoding="utf-8")
RULES_PAGE = DOCS / "rules.md"


def _gpupolicy(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_rules_page_is_current() -> None:
    """docs/rules.md is `gpupolicy rules -o markdown`; refresh it with
    `gpupolicy rules -o markdown --output-file docs/rules.md`."""
    code, out, err = _gpupolicy("rules", "-o", "markdown")
    assert code == 0, err
    assert RULES_PAGE.read_text(encoding="utf-8") == out, \
        "docs/rules.md is stale: gpupolicy rules -o markdown --output-file docs/rules.md"


@functools.cache
def _listing() -> tuple[int, str, str]:
    return _gpupolicy("rules")


@pytest.mark.parametrize("rule", sorted({*RULES, *OTHER_RULE_IDS}))
def test_every_rule_is_listed_and_documented(rule: str) -> None:
    code, out, _ = _listing()
    assert code == 0 and re.search(rf"^{re.escape(rule)} ", out, re.MULTILINE)
    code, out, _ = _gpupolicy("rules", rule)
    assert code == 0 and out.startswith(rule)
    assert documented(help_uri(rule)), help_uri(rule)


@pytest.mark.parametrize("rule", ["yaml-duplicate-key", "mutation", "engine-error",
                                  "gpu-pod-pending", "dra-claim-unresolved"])
def test_sections_that_document_other_findings(rule: str) -> None:
    assert documented(help_uri(rule)), help_uri(rule)


def test_unknown_rule_is_a_usage_error() -> None:
    code, _, err = _gpupolicy("rules", "gpu-max")
    assert code == 2 and "did you mean gpu-max-per-container" in err


def test_policy_example_is_a_valid_policy() -> None:
    section = (DOCS / "policies.md").read_text(encoding="utf-8")
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    [policy] = parse_policies(example, "docs/policies.md")
    assert policy.spec.rules.require_hardware_match


def test_two_setup_commands() -> None:
    setup = README_TEXT.split("## Set up", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^(make \w+)", setup, re.MULTILINE)
    assert commands == ["make serve", "make test"]


def test_readme_is_short_and_shows_ci_early() -> None:
    assert len(README_TEXT.encode()) < 15_000
    headings = re.findall(r"^## (.+)$", README_TEXT, re.MULTILINE)
    assert "Lint your repository in CI" in headings
    ci = README_TEXT.split("## Lint your repository in CI", 1)[1].split("\n## ", 1)[0]
    assert len(ci.splitlines()) <= 40  # one screen
    assert "gpupolicy lint -o sarif" in ci


def test_every_docs_page_is_linked_from_the_readme() -> None:
    for page in DOCS.glob("*.md"):
        assert f"(docs/{page.name})" in README_TEXT, page.name


def _code_blocks(text: str) -> list[str]:
    return re.findall(r"^```(?:sh|bash|console|yaml)\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


def _command_lines(block: str) -> list[str]:
    joined = re.sub(r"\\\n\s*", " ", block)
    lines = []
    for line in joined.splitlines():
        line = re.sub(r"^\s*(?:- )?(?:run: )?", "", line)
        if re.search(r"(^|[\s|(])(?:\S*/)?gpupolicy\s", line) and not line.startswith("#"):
            lines.append(line)
    return lines


def _invocations(line: str) -> list[list[str]]:
    """The argument lists given to `gpupolicy` in one shell line (pipes and redirections cut)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    segment: list[str] = []
    found = []
    try:
        tokens = list(lexer)
    except ValueError:  # prose in a YAML block that names the tool ("the gpupolicy release")
        if re.match(r"\s*(?:\S*/)?gpupolicy\s", line):
            raise
        return []
    for token in [*tokens, ";"]:
        if token and set(token) <= set("();<>|&"):
            if segment:
                found.append(segment)
            segment = []
        else:
            segment.append(token)
    calls = []
    for words in found:
        if words[0].rsplit("/", 1)[-1] == "gpupolicy" and len(words) > 1:
            calls.append(words[1:])
        elif words[:2] == ["docker", "run"] and "gpupolicy" in words:  # the image's entrypoint
            calls.append(words[words.index("gpupolicy") + 1:])
    return calls


COMMANDS = [
    pytest.param(args, id=f"{page.name}: gpupolicy {' '.join(args)}"[:150])
    for page in pages()
    for block in _code_blocks(page.read_text(encoding="utf-8"))
    for line in _command_lines(block)
    for args in _invocations(line)
]


def test_docs_show_commands() -> None:
    assert len(COMMANDS) > 40


@pytest.mark.parametrize("args", COMMANDS)
def test_shown_command_parses(args: list[str]) -> None:
    """Each command shown is one the real parser takes (`-` and paths are not opened)."""
    err = io.StringIO()
    if args[0].startswith("-"):
        parser = cli.top_parser()
        rest = args
    else:
        parser = cli.command_parser(args[0])
        rest = args[1:]
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            parser.parse_args(rest)
        except SystemExit as exit_:
            assert exit_.code == 0, err.getvalue()


def test_pages_are_under_docs() -> None:
    assert all(p.parent in (ROOT, DOCS) for p in pages())
    assert Path(RULES_PAGE).is_file()
