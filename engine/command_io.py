"""What a shell command line reads, and where a backgrounded job writes its output.

Harness logs rarely carry ``output_path``: a job is started as ``cmd > out.log 2>&1 &``
and its result read later with ``cat out.log``. The fact extractor reads both from the
command line (lexically, with ``shlex``; nothing is executed) so job rules can relate
them. This module is frozen with the extractor version: what it returns for a command
is part of the stored facts, so a change here is a new :data:`procgrade.engine.facts.EXTRACTOR_VERSION`.
(The importers' shell reading in ``engine/importers/shell.py`` serves a different purpose,
turning shell commands into file events, and may evolve with them.)
"""

from __future__ import annotations

import re
import shlex
from functools import lru_cache

__all__ = ["CommandIO", "command_io", "normalised_command"]

_READERS = {"cat", "head", "tail", "less", "more", "nl", "bat", "batcat", "wc", "tac", "jq"}
_VALUE_OPTIONS = {"-n", "-c", "--lines", "--bytes"}
_WRITE_REDIRECTS = {">", ">>", "&>", "&>>", ">|", "1>", "1>>", "2>", "2>>"}
_PREFIXES = {"sudo", "time", "nohup", "command", "exec", "builtin", "setsid", "stdbuf", "nice", "env"}
_NOT_PATHS = {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


class CommandIO(tuple):
    """(role, path): role ``job_started`` for a backgrounded command with the file its output
    goes to, ``read`` for a command that reads a file; ``(None, None)`` otherwise."""

    __slots__ = ()

    def __new__(cls, role: str | None, path: str | None) -> "CommandIO":
        return super().__new__(cls, (role, path))

    @property
    def role(self) -> str | None:
        return self[0]

    @property
    def path(self) -> str | None:
        return self[1]


_NONE = CommandIO(None, None)


def _tokens(command: str) -> list[str] | None:
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>\n")
        lexer.whitespace = " \t\r"
        lexer.whitespace_split = True
        lexer.commenters = ""
        return list(lexer)
    except ValueError:
        return None


def _segments(tokens: list[str]) -> list[tuple[list[str], str]]:
    """Simple commands with the separator that ends each (``&`` marks a background job;
    ``|`` a pipe into the next)."""
    out: list[tuple[list[str], str]] = []
    words: list[str] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token in ("&", ";", "&&", "||", "|", "|&", "\n", "(", ")", ";;"):
            out.append((words, token))
            words = []
        elif token in ("<", ">", ">>", "&>", "&>>", ">|", ">&", "<<", "<<<", "<&") or set(token) <= set("<>&|"):
            # a redirection operator: keep it with its target in the word list
            words.append(token)
        else:
            words.append(token)
        index += 1
    out.append((words, ""))
    return [(w, sep) for w, sep in out if w]


def _strip(words: list[str]) -> list[str]:
    while words:
        head = words[0]
        if head in _PREFIXES or _ASSIGNMENT.match(head):
            words = words[1:]
        elif head == "timeout" and len(words) > 2:
            words = words[2:]
        else:
            break
    return words


def _is_path(word: str) -> bool:
    return bool(word) and word not in _NOT_PATHS and not word.startswith(("-", "&")) \
        and not any(c in word for c in "*?$`{}")


def _redirect_target(words: list[str]) -> str | None:
    """The file stdout is redirected to (the last such redirection), if any."""
    target = None
    index = 0
    while index < len(words):
        word = words[index]
        nxt = words[index + 1] if index + 1 < len(words) else None
        if word.isdigit() and nxt in (">", ">>"):
            # "2> file" writes stderr only; "1> file" stdout
            if word == "1" and index + 2 < len(words) and _is_path(words[index + 2]):
                target = words[index + 2]
            index += 3
            continue
        if word in (">", ">>", "&>", "&>>", ">|") and nxt is not None:
            if nxt == "&" or nxt.startswith("&"):  # ">&2"
                index += 2
                continue
            if _is_path(nxt):
                target = nxt
            index += 2
            continue
        index += 1
    return target


def _tee_target(words: list[str]) -> str | None:
    words = _strip(words)
    if not words or words[0].rsplit("/", 1)[-1] != "tee":
        return None
    files = [w for w in words[1:] if not w.startswith("-") and _is_path(w)]
    return files[0] if files else None


def _read_target(words: list[str]) -> str | None:
    words = _strip(words)
    if not words or words[0].rsplit("/", 1)[-1] not in _READERS:
        return None
    operands: list[str] = []
    skip = False
    for word in words[1:]:
        if skip:
            skip = False
            continue
        if word in (">", ">>", "<", "&>", "|"):
            break
        if word.startswith("-"):
            skip = word in _VALUE_OPTIONS
            continue
        operands.append(word)
    files = [w for w in operands if _is_path(w)]
    return files[-1] if files else None


#: Command lines up to this long are remembered (ingest extracts the same lines over and over,
#: and shlex is slow); both functions are pure, so a remembered answer is the answer.
_REMEMBERED_LENGTH = 2048


def command_io(command: str | None) -> CommandIO:
    """:func:`_command_io`, remembered for short command lines."""
    if command is not None and len(command) <= _REMEMBERED_LENGTH:
        return _remembered_command_io(command)
    return _command_io(command)


def normalised_command(command: str) -> str:
    """:func:`_normalised_command`, remembered for short command lines."""
    if len(command) <= _REMEMBERED_LENGTH:
        return _remembered_normalised_command(command)
    return _normalised_command(command)


def _command_io(command: str | None) -> CommandIO:
    """What ``command`` does with files, as far as job rules care.

    A command with a simple command ending in ``&`` (or started with ``nohup``) is a
    background job; its output path is where stdout goes: a ``>``/``>>``/``&>``
    redirection of the job, or the file of a ``tee`` it pipes into, or ``nohup.out``
    for a bare ``nohup``. Otherwise a reader (``cat``, ``tail``, ``head``, ``less``, ...)
    names the file it reads. Relative spellings are normalised by the caller."""
    if not command:
        return _NONE
    tokens = _tokens(command)
    if not tokens:
        return _NONE
    segments = _segments(tokens)
    pipeline: list[list[str]] = []
    for words, separator in segments:
        pipeline.append(words)
        if separator == "|" or separator == "|&":
            continue
        background = separator == "&" or (pipeline[0][:1] == ["nohup"])
        if background:
            target = None
            for part in pipeline:
                target = _redirect_target(part) or _tee_target(part) or target
            if target is None and pipeline[0][:1] == ["nohup"]:
                target = "nohup.out"
            if target is not None or separator == "&":
                return CommandIO("job_started", target)
        pipeline = []
    for words, _separator in segments:
        target = _read_target(words)
        if target is not None:
            return CommandIO("read", target)
    return _NONE


_WRAPPER = re.compile(r"^\s*(?:cd\s+[^;&|]+?\s*(?:&&|;)\s*)+")


def _normalised_command(command: str) -> str:
    """A command line without what does not change what it does: leading ``cd DIR &&``,
    environment assignments, ``timeout N`` and ``bash -lc '...'`` wrappers, and
    whitespace (nilenso's normalisation, process_signals.md S3)."""
    text = command.strip()
    for _ in range(4):
        before = text
        text = _WRAPPER.sub("", text)
        words = _tokens(text) or []
        if len(words) >= 3 and words[0] in ("bash", "sh", "zsh") and words[1] in ("-c", "-lc", "-ic"):
            text = words[2]
            continue
        stripped = _strip(words) if words and (words[0] == "timeout" or _ASSIGNMENT.match(words[0]) or words[0] == "env") else None
        if stripped is not None and stripped != words:
            text = shlex.join(stripped)
        if text == before:
            break
    return " ".join(text.split())


_remembered_command_io = lru_cache(maxsize=4096)(_command_io)
_remembered_normalised_command = lru_cache(maxsize=4096)(_normalised_command)
