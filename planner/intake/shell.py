"""Shell scripts read as bash would run them, without running anything: the commands (shellsplit splits them)
walked in order so that `VAR=value` lines, `export`, `source` and `cd` shape the words of the commands after them
(shellvars expands them).
Control structures are read flat (both branches of an `if`, a loop's body once); function bodies are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from planner.intake import limits, slurm
from planner.intake.collect import UNKNOWN
from planner.intake.limits import read_config_text
from planner.intake.shellsplit import cut_lines, split_commands
from planner.intake.shellvars import Vars, assignment, expand, expand_one, find_file

KEYWORDS = {
    "if",
    "then",
    "else",
    "elif",
    "do",
    "while",
    "until",
    "!",
    "time",
    "{",
    "}",
    "fi",
    "done",
    "esac",
    "(",
    ")",
    "exec",
    "nohup",
    "command",
}
IGNORED = {
    "echo",
    "printf",
    "mkdir",
    "rm",
    "cp",
    "mv",
    "set",
    "shift",
    "exit",
    "return",
    "[",
    "[[",
    "test",
    "sleep",
    "wait",
    "trap",
    "ulimit",
    "conda",
    "pip",
    "pip3",
    "cat",
    "ls",
    "touch",
    "chmod",
    "true",
    "false",
    ":",
}


@dataclass
class Word:
    text: str  # expanded; UNKNOWN marks a part the script does not give
    line: int
    raw: str  # as written


@dataclass
class Command:
    words: list[Word]
    env: dict[str, str]  # its environment: the exported variables and its own VAR=value prefixes
    prefix: dict[str, str]  # the prefixes alone
    line: int
    path: Path
    vars: Vars  # the shell's state when it runs (to read a string it hands to `ssh` or `bash -c`)

    @property
    def argv(self) -> list[str]:
        return [w.text for w in self.words]


@dataclass
class Script:
    path: Path
    commands: list[Command] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# -- walking ------------------------------------------------------------------------------------------------------
def read_script(path: Path, text: str | None = None, vars: Vars | None = None) -> Script:
    """Every command of a script, its words expanded with the variables set before it."""
    path = path.resolve()
    script = Script(path)
    with limits.reading(path):
        state = vars or Vars(script=path)
        text = read_config_text(path, errors="replace") if text is None else text
        if vars is None:
            slurm.sbatch_environment(text, state)
            slurm.given_allocation(state)
        walker = _Walker(script, state)
        walker.walk(_split(text, path, f"--config {path.name} ", script.notes), path, 0)
        walker.uncalled(path)
        if vars is None:
            script.notes += slurm.given_lines(state)
    return script


def read_text(text: str, path: Path, vars: Vars, depth: int = 0) -> Script:
    """A command string a script hands to ssh, `bash -c` or a container, read as a script run with `vars`."""
    script = Script(path)
    _Walker(script, vars).walk(_split(text, None), path, depth)
    return script


def _split(
    text: str, path: Path | None, where: str = "", notes: list[str] | None = None
) -> list[list[tuple[str, int]]]:
    """The commands of a script's text, up to limits.MAX_SCRIPT_BYTES of it (`path`: the file, for that line); a
    line in `notes` for each comment line that ends a command its writer meant to continue (cut_lines)."""
    if len(text) > limits.MAX_SCRIPT_BYTES:
        limits.refuse(
            f"{limits.about(path)}a shell script of over {limits.MAX_SCRIPT_BYTES >> 20} MiB (memplan reads launch "
            "scripts up to that size)"
        )
    limits.spend("shell_bytes", len(text))
    cuts: list[tuple[int, int, str]] = []
    commands = split_commands(text, where, cuts)
    if notes is not None and path is not None:
        notes += cut_lines(commands, cuts, path.name)
    return joined(commands, notes if path is not None else None, path.name if path is not None else "")


def joined(commands: list[list[tuple[str, int]]], notes: list[str] | None, name: str) -> list[list[tuple[str, int]]]:
    """A command posted without its `\\` continuations (ms-swift#3183: each flag on a line of its own): the lines
    right after a one-line command that begin with a flag (no command does) are read as its arguments, and the lines
    of `VAR=value` right before it as its environment prefix, as the command was meant; bash would end it at each
    line (and fail on `--flag` as a command), so a line in `notes` says so. A command continued with `\\` that
    misses one (VLM-R1#215) is cut there as bash cuts it, and said."""
    out: list[list[tuple[str, int]]] = []
    joined_to: list[bool] = []  # out[k] took flag lines already (said once)
    for cmd in commands:
        prev = out[-1] if out else None
        if prev is None or not cmd[0][0].startswith("-") or cmd[0][1] != prev[-1][1] + 1 or _assigns(prev):
            out.append(cmd)
            joined_to.append(False)
            continue
        if not joined_to[-1] and prev[0][1] != prev[-1][1]:  # one `\` missing in a continued command: bash's cut
            if notes is not None:
                rest = " ".join(w for w, _ in cmd[:3]) + (" ..." if len(cmd) > 3 else "")
                notes.append(
                    f"{name}:{prev[-1][1]} has no `\\`: bash ends the command begun on line {prev[0][1]} there, and "
                    f"line {cmd[0][1]}'s {rest} is a command of its own (those flags are not passed)"
                )
            out.append(cmd)
            joined_to.append(False)
            continue
        if not joined_to[-1]:
            head = f"line {prev[0][1]}'s {prev[0][0]}"
            while len(out) > 1 and _assigns(out[-2]) and out[-2][-1][1] + 1 == out[-1][0][1]:
                out[-2:], joined_to[-2:] = [out[-2] + out[-1]], [False]
            if notes is not None:
                notes.append(
                    f"{name}:{cmd[0][1]} lines that begin with a flag follow {head} without a `\\` (bash would run "
                    "each as a command of its own): read as its arguments, and the `VAR=value` lines just above it as "
                    "its environment, as the command was meant"
                )
            joined_to[-1] = True
        out[-1] = out[-1] + cmd
    return out


def _assigns(cmd: list[tuple[str, int]]) -> bool:
    return all(re.match(r"[A-Za-z_][A-Za-z0-9_]*\+?=", w) for w, _ in cmd)


class _Walker:
    def __init__(self, script: Script, vars: Vars) -> None:
        self.script, self.vars = script, vars
        # shell functions: name -> (the commands of its body, the line it is defined on); the names called
        self.functions: dict[str, tuple[list[list[tuple[str, int]]], int]] = {}
        self.called: set[str] = set()

    def walk(self, raws: list[list[tuple[str, int]]], path: Path, depth: int) -> None:
        skip, awaiting, body = 0, False, None
        for raw in raws:
            limits.spend("commands", 1)
            words = [w for w, _ in raw]
            if skip or awaiting:
                awaiting = awaiting and "{" not in words
                skip += words.count("{") - words.count("}")
                skip = 0 if skip <= 0 and not awaiting else skip
                inner = [(w, n) for w, n in raw if w not in ("{", "}")]
                if inner and body is not None:
                    body.append(inner)
                continue
            if _function(words):
                name = words[1] if words[0] == "function" else words[0]
                body = self.functions.setdefault(name, ([], raw[0][1]))[0]
                skip, awaiting = words.count("{") - words.count("}"), "{" not in words
                after = words.index("{") + 1 if "{" in words else len(words)
                inner = [(w, n) for w, n in raw[after:] if w != "}"]
                if inner:
                    body.append(inner)
                continue
            while raw and raw[0][0] in KEYWORDS:
                raw = raw[1:]
            if raw and raw[0][0] in ("for", "select", "case"):
                if len(raw) > 1:
                    self.vars.set(raw[1][0], UNKNOWN)
                continue
            if raw:
                self._command(raw, path, depth)

    def _command(self, raw: list[tuple[str, int]], path: Path, depth: int) -> None:
        prefix: dict[str, str] = {}
        while raw and (a := assignment(raw[0][0], self.vars)) is not None:
            prefix[a[0]] = a[1]
            raw = raw[1:]
        if not raw:
            for name, value in prefix.items():
                self.vars.set(name, value)
            return
        head = expand_one(raw[0][0], self.vars)
        if head in ("export", "declare", "typeset", "local", "readonly"):
            return self._declare(head, [w for w, _ in raw[1:]])
        if head == "unset":
            for w, _ in raw[1:]:
                self.vars.unset(w)
            return None
        if head in ("source", "."):
            return self._source(raw[1:], path, depth)
        if head == "cd":
            return self._cd(raw[1:])
        if head in IGNORED:
            return None
        if head in self.functions and depth < limits.MAX_SOURCE_DEPTH:  # a function's commands, where it is called
            self.called.add(head)
            saved = self.vars.positional
            self.vars.positional = [expand_one(w, self.vars) for w, _ in raw[1:]]
            self.walk(self.functions[head][0], path, depth + 1)
            self.vars.positional = saved
            return None
        words = [Word(t, line, w) for w, line in raw for t in expand(w, self.vars)]
        limits.spend("words", len(words))
        env = self.vars.exported_values() | prefix
        self.script.commands.append(Command(words, env, prefix, raw[0][1], path, self.vars.copy()))
        return None

    def uncalled(self, path: Path) -> None:
        """The functions the script defines and never calls, read as if they ran last, and said so: a posted script
        often defines its training command in a function that another file calls."""
        for name, (body, line) in list(self.functions.items()):  # a body may define more functions
            if name in self.called or not body:
                continue
            before = len(self.script.commands)
            self.walk(body, path, 1)
            if len(self.script.commands) > before:
                self.script.notes.append(
                    f"{path.name}:{line} function {name} is not called in {path.name}: its commands are read as if "
                    "it ran"
                )

    def _declare(self, head: str, args: list[str]) -> None:
        export = head == "export" or "-x" in args
        for arg in args:
            if arg.startswith("-"):
                continue
            a = assignment(arg, self.vars)
            name = a[0] if a else arg
            if a:
                self.vars.set(name, a[1])
            if export:
                self.vars.exported.add(name)

    def _source(self, raw: list[tuple[str, int]], path: Path, depth: int) -> None:
        if not raw:
            return
        ref = expand_one(raw[0][0], self.vars)
        found = find_file(ref, self.vars, path) if depth < limits.MAX_SOURCE_DEPTH else None
        try:
            text = read_config_text(found, errors="replace") if found is not None else None
        except OSError:
            text = None
        if text is None:
            why = (
                "file not found"
                if depth < limits.MAX_SOURCE_DEPTH
                else f"sourced over {limits.MAX_SOURCE_DEPTH} levels deep"
            )
            self.script.notes.append(
                f"{path.name}:{raw[0][1]} source {ref.replace(UNKNOWN, '?')}: {why} (what it sets is not read)"
            )
            return
        self.script.files.append(found)
        saved = self.vars.positional
        self.vars.positional = [expand_one(w, self.vars) for w, _ in raw[1:]] or saved
        where = f"{path.name}:{raw[0][1]} source {found.name}: "
        self.walk(_split(text, found, where, self.script.notes), found, depth + 1)
        self.vars.positional = saved

    def _cd(self, raw: list[tuple[str, int]]) -> None:
        target = expand_one(raw[0][0], self.vars) if raw else ""
        if not target or UNKNOWN in target or target == "-" or Path(target).is_absolute():
            self.vars.cd_words = ""
        if not target or UNKNOWN in target or target == "-":
            self.vars.cwd = None
        elif Path(target).is_absolute():
            self.vars.cwd = Path(target)
        else:
            self.vars.cwd = self.vars.cwd / target if self.vars.cwd else None
            self.vars.cd_words = f"{self.vars.cd_words}/{target}" if self.vars.cwd is None else ""


def _function(words: list[str]) -> bool:
    """`name() {`, `function name {`, `function name() {`."""
    if words[:1] == ["function"]:
        return True
    return len(words) >= 3 and words[1:3] == ["(", ")"] and re.fullmatch(r"[\w.:-]+", words[0]) is not None
