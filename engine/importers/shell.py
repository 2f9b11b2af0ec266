"""What a shell command line does to files, and its exit code when only text tells.

Agents read and edit files through the shell as often as through their harness's
file tools (``cat``, ``sed -i``, ``cat > f <<EOF``, ``git apply``), so an importer
that only saw the tools would miss half the reads the rules look for. This is a
lexical reading of the command line (``shlex``), never executed: it recognises the
common reading and writing commands, redirections, heredoc patches, ``rm`` and
``mv``; anything else has no file effect. Globs and variables are left alone.
"""

from __future__ import annotations

import re
import shlex

from procgrade.engine.importers.patches import FileEffect, patch_effects

__all__ = ["FileEffect", "split_pipeline", "file_effects", "exit_code_from_text"]

_SEPARATORS = {";", "&&", "||", "|", "&", "\n", "|&", "(", ")"}
_SEPARATOR_CHARS = set(";&|()\n")
_REDIRECTS = {">", ">>", "&>", ">|", "1>", "2>", "2>>", "1>>"}

# Commands whose plain operands are files they read.
_READERS = {"cat", "head", "tail", "less", "more", "nl", "bat", "batcat", "view", "wc", "diff", "cmp", "file", "stat", "xxd", "od"}
# Commands whose last operand is a file they read after a pattern operand.
_PATTERN_READERS = {"grep", "egrep", "fgrep", "rg", "ag", "awk"}
_OPTIONS_WITH_VALUES = {
    "head": {"-n", "-c"}, "tail": {"-n", "-c"}, "grep": {"-e", "-f", "-m", "-A", "-B", "-C"},
    "rg": {"-e", "-g", "-t", "-m", "-A", "-B", "-C"}, "sed": {"-e", "-f"}, "awk": {"-F", "-v", "-f"},
}


def split_pipeline(command: str) -> list[list[str]]:
    """The simple commands of a command line, as word lists (separators dropped).
    Heredoc bodies are cut off first: they are data, not commands."""
    body_free = _HEREDOC.sub(lambda m: m.group(1), command)
    try:
        # A newline ends a command as ";" does: "cd x\npytest" is two commands.
        lexer = shlex.shlex(body_free, posix=True, punctuation_chars=";&|()<>\n")
        lexer.whitespace = " \t\r"
        lexer.whitespace_split = True
        lexer.commenters = ""
        words = list(lexer)
    except ValueError:  # unbalanced quotes: the line is not something we can read
        return []
    commands: list[list[str]] = [[]]
    for word in words:
        if word in _SEPARATORS or set(word) <= _SEPARATOR_CHARS:
            commands.append([])
        else:
            commands[-1].append(word)
    return [c for c in commands if c]


_HEREDOC = re.compile(r"(<<-?\s*['\"]?(\w+)['\"]?[^\n]*)\n[\s\S]*?\n\s*\2\s*(?=\n|$)")
_HEREDOC_BODY = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?[^\n]*\n([\s\S]*?)\n\s*\1\s*(?:\n|$)")


def file_effects(command: str) -> list[FileEffect]:
    """Files ``command`` reads or changes, in order of appearance (duplicates removed)."""
    effects: list[FileEffect] = []
    for words in split_pipeline(command):
        effects.extend(_simple_command_effects(words))
    if re.search(r"\b(git\s+apply|patch)\b", command):
        for body in _HEREDOC_BODY.finditer(command):
            effects.extend(patch_effects(body.group(2)))
    seen: set[FileEffect] = set()
    unique = []
    for effect in effects:
        if effect not in seen:
            seen.add(effect)
            unique.append(effect)
    return unique


def _simple_command_effects(words: list[str]) -> list[FileEffect]:
    words = _strip_prefixes(words)
    if not words:
        return []
    effects: list[FileEffect] = []
    operands: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        if word.isdigit() and index + 1 < len(words) and (words[index + 1] in _REDIRECTS or words[index + 1].startswith(">&")):
            index += 1  # the fd number of "2>" or "2>&1"
            continue
        if word.startswith(">&") or word == "<&":
            index += 2
            continue
        if word in _REDIRECTS or word == "<":
            target = words[index + 1] if index + 1 < len(words) else None
            if target and _is_path(target):
                if word == "<":
                    effects.append(FileEffect("read", target))
                else:
                    effects.append(FileEffect("edit", target, "modify" if ">>" in word else "create"))
            index += 2
            continue
        if word in ("<<", "<<-", "<<<"):
            index += 2
            continue
        operands.append(word)
        index += 1
    if not operands:  # "> file", "< in": redirections only, no program
        return effects
    program, args = operands[0].rsplit("/", 1)[-1], operands[1:]
    effects = _program_effects(program, args) + effects
    return effects


def _strip_prefixes(words: list[str]) -> list[str]:
    """Drop ``sudo``, ``env A=b``, ``time``, ``timeout 10`` and leading assignments."""
    while words:
        head = words[0]
        if head in ("sudo", "time", "nohup", "command", "exec", "builtin"):
            words = words[1:]
        elif head == "env" or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", head):
            words = words[1:]
        elif head == "timeout" and len(words) > 2:
            words = words[2:]
        else:
            return words
    return words


def _is_path(word: str) -> bool:
    return bool(word) and not word.startswith("-") and word not in ("/dev/null", "/dev/stdout", "/dev/stderr") \
        and not any(c in word for c in "*?$`{}") and not word.startswith("&")


def _plain_operands(program: str, args: list[str]) -> list[str]:
    takes_value = _OPTIONS_WITH_VALUES.get(program, set())
    operands: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg == "--":
            continue
        if arg.startswith("-"):
            skip = arg in takes_value
            continue
        operands.append(arg)
    return operands


def _program_effects(program: str, args: list[str]) -> list[FileEffect]:
    if program in _READERS:
        return [FileEffect("read", p) for p in _plain_operands(program, args) if _is_path(p)]
    if program in _PATTERN_READERS:
        if program in ("grep", "egrep", "fgrep") and any(_recursive_flag(a) for a in args):
            return []  # a recursive search reads a tree, not a file it names
        operands = _plain_operands(program, args)
        has_pattern_option = any(a in ("-e", "-f") for a in args)
        files = operands if has_pattern_option else operands[1:]
        return [FileEffect("read", p) for p in files if _is_path(p) and _looks_like_file(p)]
    if program == "sed":
        in_place = any(a == "-i" or a.startswith("-i") or a == "--in-place" for a in args)
        operands = _plain_operands(program, args)
        has_script_option = any(a in ("-e", "-f") for a in args)
        files = operands if has_script_option else operands[1:]
        kind = "edit" if in_place else "read"
        return [FileEffect(kind, p, "modify" if in_place else None) for p in files if _is_path(p)]
    if program == "tee":
        return [FileEffect("edit", p, "modify" if "-a" in args else "create")
                for p in _plain_operands(program, args) if _is_path(p)]
    if program == "touch":
        return [FileEffect("edit", p, "create") for p in _plain_operands(program, args) if _is_path(p)]
    if program in ("rm", "unlink"):
        return [FileEffect("edit", p, "delete") for p in _plain_operands(program, args) if _is_path(p)]
    if program in ("mv", "git") and args:
        if program == "git":
            if args[0] != "mv":
                return []
            args = args[1:]
        operands = [p for p in _plain_operands("mv", args) if _is_path(p)]
        if len(operands) == 2:
            return [FileEffect("edit", operands[0], "rename", operands[1])]
        return []
    if program == "cp":
        operands = [p for p in _plain_operands("cp", args) if _is_path(p)]
        if len(operands) == 2 and "-r" not in args and "-R" not in args:
            return [FileEffect("read", operands[0]), FileEffect("edit", operands[1], "create")]
        return []
    if program == "patch":
        operands = [p for p in _plain_operands("patch", args) if _is_path(p)]
        return [FileEffect("edit", operands[0], "modify")] if operands else []
    return []


def _recursive_flag(arg: str) -> bool:
    if arg in ("--recursive", "--dereference-recursive"):
        return True
    return arg.startswith("-") and not arg.startswith("--") and bool(set(arg[1:]) & {"r", "R"})


def _looks_like_file(word: str) -> bool:
    """A grep/rg operand that names a file rather than a directory (``.`` and ``src/`` are searches)."""
    last = word.rstrip("/").rsplit("/", 1)[-1]
    return not word.endswith("/") and word not in (".", "..") and "." in last


_EXIT_CODE_PATTERNS = (
    re.compile(r"\[Command finished with exit code (-?\d+)\]"),
    re.compile(r"(?im)^\s*exit(?:ed with)? code:?\s*(-?\d+)\s*$"),
    re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>"),
    re.compile(r"(?i)process exited with (?:exit )?code (-?\d+)"),
    re.compile(r"(?im)^\s*exit status:?\s*(-?\d+)\s*$"),
    re.compile(r"(?im)^\s*returncode:?\s*(-?\d+)\s*$"),
)


def exit_code_from_text(text: str) -> int | None:
    """The exit code a harness printed into a command's output, when it did
    (``[Command finished with exit code 1]``, ``Exit code: 0``, ``<returncode>2</returncode>``)."""
    for pattern in _EXIT_CODE_PATTERNS:
        matches = pattern.findall(text)
        if matches:
            return int(matches[-1])
    return None
