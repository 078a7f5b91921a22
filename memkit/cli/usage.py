"""Usage errors that say what to do: a "did you mean" for a mistyped command, option or choice.

argparse's own messages name what was wrong but seldom the remedy ("invalid choice: 'gett'",
"unrecognized arguments: --usr a", the latter under the top-level usage rather than the command's).
Python 3.14's `suggest_on_error` covers commands and choices only, and the kit supports 3.11, so
`MemkitParser` checks the words of a command line itself and rewrites argparse's messages: each
usage error is the command's usage and one `error:` line naming the mistake and what to do, exit 2.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

__all__ = ["MemkitParser", "did_you_mean"]

_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # a value such as --min-similarity -0.5, not an option
_INVALID_CHOICE = re.compile(r"argument (?P<arg>[^:]+): invalid choice: '?(?P<value>.*?)'? "
                             r"\(choose from (?P<all>.*)\)$")
_INVALID_NUMBER = re.compile(r"argument (?P<arg>[^:]+): invalid (?P<type>int|float) value: '(?P<value>.*)'$")
_EXPECTED = re.compile(r"argument (?P<arg>[^:]+): expected (?P<count>one|\d+) arguments?$")


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """"; did you mean X?" for the choice a mistyped or shortened word most likely meant, or "".

    Example:
        >>> did_you_mean("gett", ["get", "put"]), did_you_mean("pref", ["preference", "episode"])
        ("; did you mean 'get'?", "; did you mean 'preference'?")
    """
    choices = list(choices)
    started = [choice for choice in choices if word and choice.startswith(word)]
    close = started[:1] if len(started) == 1 else difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


class MemkitParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors name the mistake and the remedy (the module says why).

    Subcommands made with `add_subparsers().add_parser` are MemkitParsers too (argparse gives them
    the parent's class); `siblings` lets one name the commands that take an option it lacks. A
    refused command line exits 2 before any handler runs.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # An abbreviation (`--us` for `--user`) is refused with the whole name suggested: accepted, it
        # would change meaning the day another option starting with those letters is added.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.siblings: dict[str, MemkitParser] = {}

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        words = list(sys.argv[1:] if args is None else args)
        self._refuse_unknown_words(words)
        return super().parse_known_args(words, namespace)

    def error(self, message: str) -> NoReturn:
        """argparse's refusal, with the remedy added: the usage, one line, exit 2 (argparse's contract)."""
        self.refuse(self._with_remedy(message))

    def refuse(self, message: str) -> NoReturn:
        """Print this command's usage and `error: message` (which names the remedy), then exit 2."""
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")

    def refuse_extra(self, extra: list[str]) -> NoReturn:
        """Refuse words no argument took (argparse would name them under the top-level usage)."""
        self.refuse(f"unexpected {'argument' if len(extra) == 1 else 'arguments'} {' '.join(extra)}: "
                   f"{self.prog} takes no such words (quote a value with spaces); see `{self.prog} --help`")

    # -- what the command line names ------------------------------------------------------------------

    def link_commands(self) -> None:
        """Once every command is added: let each name the others that take an option it lacks."""
        for parser in self._commands().values():
            parser.siblings = self._commands()

    def command_parser(self, name: str | None) -> MemkitParser:
        """The parser of command `name` (this parser when no command was given)."""
        return self._commands().get(name or "", self)

    def _commands(self) -> dict[str, MemkitParser]:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return action.choices  # type: ignore[return-value]
        return {}

    def _refuse_unknown_words(self, words: list[str]) -> None:
        commands = self._commands()
        for word in words:
            if word == "--":
                return
            if not _looks_like_option(word):
                if commands and word not in commands:
                    self.refuse(f"unknown command '{word}'{did_you_mean(word, commands) or self._list(commands)}")
                if commands:
                    return  # the rest belongs to the command, whose own parser checks it
                continue
            name = word.split("=", 1)[0]
            if name in self._option_string_actions:
                continue
            self.refuse(self._unknown_option(name, commands))

    def _unknown_option(self, name: str, commands: dict[str, MemkitParser]) -> str:
        takers = sorted(command for command, parser in (commands or self.siblings).items()
                        if name in parser._option_string_actions)
        if commands and takers:  # `memkit --db x get`: the option is right, its place is not
            example = "get" if "get" in takers else takers[0]
            return f"{name} goes after the command, as in `memkit {example} {name} ...`"
        if takers:
            return (f"{self.prog} has no option {name} ({', '.join(takers)} {'take' if len(takers) > 1 else 'takes'} "
                    f"it); `{self.prog} --help` lists its options")
        hint = did_you_mean(name, self._option_string_actions)
        return f"unknown option {name}{hint or f'; `{self.prog} --help` lists the options'}"

    @staticmethod
    def _list(commands: Iterable[str]) -> str:
        return f"; the commands are {', '.join(commands)} (`memkit --help` says what each does)"

    # -- argparse's messages, with the remedy added -----------------------------------------------------

    def _with_remedy(self, message: str) -> str:
        if match := _INVALID_CHOICE.match(message):
            choices = [choice.strip(" '") for choice in match["all"].split(",")]
            value = match["value"]
            return (f"{match['arg']} '{value}' is not one of {', '.join(choices)}"
                    f"{did_you_mean(value, choices) or '; choose one of them'}")
        if match := _INVALID_NUMBER.match(message):
            kind = "a whole number" if match["type"] == "int" else "a number"
            return f"{match['arg']} '{match['value']}' is not {kind}; give {kind}, as in {match['arg']} 5"
        if match := _EXPECTED.match(message):
            count = "a value" if match["count"] == "one" else f"{match['count']} values"
            return f"{match['arg']} needs {count} after it; `{self.prog} --help` says what it takes"
        if message.startswith("the following arguments are required: "):
            missing = message.split(": ", 1)[1]
            verb = "are" if ", " in missing else "is"
            return f"{missing} {verb} required; `{self.prog} --help` says what each one is"
        return f"{message}; `{self.prog} --help` says what it takes"


def _looks_like_option(word: str) -> bool:
    # argparse takes a word with a space, a lone "-" and a negative number as a value, not an option.
    return word.startswith("-") and word != "-" and " " not in word and not _NEGATIVE_NUMBER.match(word)
