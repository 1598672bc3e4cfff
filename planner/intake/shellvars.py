"""A shell word's value, expanded as bash expands it from what the script itself sets: quotes, `$VAR`, `${VAR}`,
`${VAR:-default}` (and `-`, `:=`, `:+`), `${#VAR}`, `$((a * b))` on known values, the command substitutions scripts
use to compute a number or a folder (`$(expr 16 / $n)`, `$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)`), and
field splitting of unquoted results. A value the script does not give (the launching shell's environment, arrays,
other commands' output) is UNKNOWN; it is never read from this process's environment. Also where a path a script
names is found.
"""

from __future__ import annotations

import ast
import operator
import re
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from planner.errors import BadInput
from planner.intake import limits
from planner.intake.collect import UNKNOWN, is_dir, is_file
from planner.intake.shellsplit import brace_end, dq_end, nest, paren_end, split_commands

NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_PLAIN = re.compile(r"[^'\"\\$`]+")  # a run of a word's characters that expand to themselves
_PLAIN_DQ = re.compile(r"[^\\$`]*")  # likewise inside double quotes
_ASSIGN = re.compile(rf"({NAME})(\+?)=(.*)", re.DOTALL)
# The files given together (`--config train.sh x.yaml`): a file one of them names is also found among these, as the
# reading's error asks ("pass it too"); set by dispatch.read_all for one reading
GIVEN: ContextVar[tuple[Path, ...]] = ContextVar("memplan_intake_given", default=())


@dataclass
class Vars:
    script: Path
    values: dict[str, str] = field(default_factory=dict)
    exported: set[str] = field(default_factory=set)
    positional: list[str] = field(default_factory=list)
    cwd: Path | None = None  # where the script runs: unknown until it changes to a known folder
    # the folders a relative `cd` names from an unknown folder (`cd src/r1-v`): not a place, only what it says of the
    # run (a fork's folder name: planner.frameworks.trl FORK_PATHS)
    cd_words: str = ""
    nesting: int = 0  # expansions open within one another now (limits.MAX_SHELL_NESTING)
    version: int = 0  # bumped by every set and unset: exported_values is cached on it
    _env: tuple = field(default=(None, {}), repr=False, compare=False)
    # variables whose reads are noted (shared by every copy): the Slurm ones a flag of the caller set, and those read
    watched: set[str] = field(default_factory=set)
    seen: set[str] = field(default_factory=set)

    def copy(self) -> Vars:
        out = Vars(self.script, dict(self.values), set(self.exported), list(self.positional), self.cwd)
        out.cd_words = self.cd_words
        out.watched, out.seen = self.watched, self.seen
        return out

    def set(self, name: str, value: str) -> None:
        """Bind `name` (limits.shell_variable: its value's size, the number of variables)."""
        limits.shell_variable(name, value, len(self.values) + (name not in self.values))
        self.values[name] = value
        self.version += 1

    def unset(self, name: str) -> None:
        self.values.pop(name, None)
        self.version += 1

    def exported_values(self) -> dict[str, str]:
        """The exported variables' values (a command's environment), computed again only after a change."""
        key = (self.version, len(self.exported))
        if self._env[0] != key:
            self._env = (key, {k: v for k, v in self.values.items() if k in self.exported})
        return self._env[1]

    def get(self, name: str) -> str | None:
        if name in self.watched:
            self.seen.add(name)
        if name.isdigit():
            n = int(name)
            return str(self.script) if n == 0 else (self.positional[n - 1] if n <= len(self.positional) else None)
        if name == "PWD":
            return str(self.cwd) if self.cwd else UNKNOWN
        return self.values.get(name)


# -- expansion ------------------------------------------------------------------------------------------------
def expand(raw: str, v: Vars) -> list[str]:
    """The fields a word expands to (an unquoted empty expansion vanishes, an unquoted list splits)."""
    fields, cur, has = [], [], False  # cur: the parts of the field being built
    for text, split, quoted in _segments(raw, v):
        if not split:
            cur.append(text)
            has = has or quoted or bool(text)
            continue
        for k, part in enumerate(re.split(r"[ \t\n]+", text)):
            if k > 0 and has:
                fields.append("".join(cur))
                cur, has = [], False
            cur.append(part)
            has = has or bool(part)
    if has:
        fields.append("".join(cur))
    return fields


def expand_one(raw: str, v: Vars) -> str:
    """A word expanded without splitting (an assignment's value, a path)."""
    return "".join(text for text, _, _ in _segments(raw, v))


def assignment(raw: str, v: Vars) -> tuple[str, str] | None:
    """(name, value) of a `NAME=value` word; an array (`NAME=(a b)`) is UNKNOWN."""
    m = _ASSIGN.fullmatch(raw)
    if not m:
        return None
    value = UNKNOWN if m.group(3).startswith("(") else expand_one(m.group(3), v)
    return m.group(1), (v.values.get(m.group(1), "") + value if m.group(2) else value)


def _segments(raw: str, v: Vars) -> list[tuple[str, bool, bool]]:
    """(text, splittable, quoted) pieces of a word."""
    out, i = [], 0
    while i < len(raw):
        c = raw[i]
        if c == "'":
            end = raw.find("'", i + 1)
            end = len(raw) if end < 0 else end
            out.append((raw[i + 1 : end], False, True))
            i = end + 1
        elif c == '"':
            end = dq_end(raw, i)
            out.append((_text(raw[i + 1 : end - 1], v), False, True))
            i = end
        elif c == "\\":
            out.append((raw[i + 1 : i + 2], False, True))
            i += 2
        elif c in "$`":
            value, i = _dollar(raw, i, v)
            out.append((value, True, False))
        else:
            end = _PLAIN.match(raw, i).end()
            out.append((raw[i:end], False, False))
            i = end
    return out


def _text(s: str, v: Vars) -> str:
    """The inside of double quotes."""
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and s[i + 1 : i + 2] in ("$", "`", '"', "\\", "\n"):
            out.append("" if s[i + 1] == "\n" else s[i + 1])
            i += 2
        elif c in "$`":
            value, i = _dollar(s, i, v)
            out.append(value)
        else:
            end = _PLAIN_DQ.match(s, i + 1).end()
            out.append(s[i:end])
            i = end
    return "".join(out)


def _dollar(s: str, i: int, v: Vars) -> tuple[str, int]:
    """The value of the expansion starting at i, and the index after it; expansions within expansions past
    limits.MAX_SHELL_NESTING are refused, and every value counts against the reading's limits.MAX_EXPANDED_BYTES."""
    v.nesting = nest(v.nesting)
    try:
        value, end = _expansion(s, i, v)
    finally:
        v.nesting -= 1
    limits.spend("expanded_bytes", len(value))
    return value, end


def _expansion(s: str, i: int, v: Vars) -> tuple[str, int]:
    if s[i] == "`":
        end = s.find("`", i + 1)
        end = len(s) if end < 0 else end
        return _command(s[i + 1 : end], v), end + 1
    if s.startswith("$((", i):
        end = paren_end(s, i + 1)
        return _arith(s[i + 3 : end - 2], v), end
    if s.startswith("$(", i):
        end = paren_end(s, i + 1)
        return _command(s[i + 2 : end - 1], v), end
    if s.startswith("${", i):
        end = brace_end(s, i + 1)
        return _param(s[i + 2 : end - 1], v), end
    m = re.compile(rf"{NAME}|[0-9]").match(s, i + 1)
    if m:
        value = v.get(m.group(0))
        return (UNKNOWN if value is None else value), m.end()
    if s[i + 1 : i + 2] in ("@", "*", "#", "?", "$", "!", "-"):
        return UNKNOWN, i + 2
    return "$", i + 1


def _param(inner: str, v: Vars) -> str:
    if inner.startswith("#"):
        value = v.get(inner[1:])
        return UNKNOWN if value is None or UNKNOWN in value or "[" in inner else str(len(value))
    m = re.match(rf"({NAME}|[0-9]+)(\[[^]]*\])?(.*)", inner, re.DOTALL)
    if not m:
        return UNKNOWN
    name, index, rest = m.groups()
    if index:
        return str(v.script) if name == "BASH_SOURCE" and index in ("[0]", "[@]") and not rest else UNKNOWN
    value = v.get(name)
    op = re.match(r":?[-=+?]", rest)
    if not rest:
        return UNKNOWN if value is None else value
    if not op:
        return UNKNOWN  # ${x%pattern}, ${x/a/b}, ${x:1:2}: not worked out
    word = " ".join(expand(rest[op.end() :], v))
    empty = value is None or (op.group(0).startswith(":") and value == "")
    if op.group(0).endswith("+"):
        return "" if empty else word
    if op.group(0).endswith("=") and empty:
        v.set(name, word)
    return word if empty else value


_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Mod: operator.mod,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
}


def _arith(expr: str, v: Vars) -> str:
    """$(( ... )) on integers the script sets; bash's / is integer division."""

    def value(m: re.Match) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        got = v.get(name)
        return limits.arith_text(got) if got is not None else UNKNOWN

    text = re.sub(rf"\$\{{({NAME})\}}|\$({NAME}|[0-9])|\b({NAME})\b", value, limits.arith_text(expr))
    if UNKNOWN in text:
        return UNKNOWN
    try:
        tree = ast.parse(limits.arith_text(text).strip().replace("/", "//").replace("////", "//"), mode="eval")
        return str(_eval(tree.body))
    except limits.OverLimit:
        raise
    except (SyntaxError, ValueError, ZeroDivisionError, KeyError, TypeError, OverflowError, RecursionError):
        return UNKNOWN


def _eval(node: ast.AST, depth: int = 0) -> int:
    """An integer expression under bash's 64-bit bounds (limits.int64), MAX_ARITH_DEPTH operations deep at most."""
    limits.arith_depth(depth)
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return limits.int64(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _eval(node.operand, depth + 1)
        return limits.int64(-inner if isinstance(node.op, ast.USub) else inner)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _eval(node.left, depth + 1), _eval(node.right, depth + 1)
        if isinstance(node.op, ast.Pow):
            return limits.int64_power(left, right)
        return limits.int64(_OPS[type(node.op)](left, right))
    raise ValueError("not arithmetic")


def _command(text: str, v: Vars) -> str:
    """A command substitution scripts use to compute a value; UNKNOWN for any other command's output."""
    try:
        cmds = [[expand_one(w, v) for w, _ in c] for c in split_commands(text)]
    except limits.OverLimit:
        raise
    except BadInput:  # a quote left open inside $( ): its output is not known
        return UNKNOWN
    if len(cmds) == 2 and cmds[0][:1] == ["cd"] and cmds[1] == ["pwd"] and len(cmds[0]) == 2:
        return _folder(cmds[0][1], v)
    if len(cmds) != 1 or not cmds[0]:
        return UNKNOWN
    head, args = cmds[0][0], cmds[0][1:]
    if head == "expr" and args:
        return _arith(" ".join(a.replace("\\*", "*") for a in args), v)
    if head == "dirname" and len(args) == 1 and UNKNOWN not in args[0]:
        return str(Path(args[0]).parent)
    if head == "basename" and args and UNKNOWN not in args[0]:
        return Path(args[0]).name
    if head in ("realpath", "readlink") and args:
        return _folder(args[-1], v)
    if head == "pwd" and not args:
        return str(v.cwd) if v.cwd else UNKNOWN
    if head == "echo":
        return " ".join(a for a in args if not a.startswith("-"))
    return UNKNOWN


def _folder(path: str, v: Vars) -> str:
    if UNKNOWN in path:
        return UNKNOWN
    p = Path(path)
    if not p.is_absolute():
        if v.cwd is None:
            return UNKNOWN
        p = v.cwd / p
    return str(Path(*[part for part in p.parts]).resolve())


def find_file(ref: str, v: Vars | None, near: Path) -> Path | None:
    """A file a script or config names: as given if absolute, else in the folder the script has changed to, next to
    the file naming it or in a folder above it (scripts run from their repository's root), else in this process's
    working folder."""
    if not ref or UNKNOWN in ref:
        return None
    p = Path(ref).expanduser()
    if p.is_absolute():
        return p.resolve() if is_file(p) else _given(p)
    base = near if is_dir(near) else near.parent
    places = ([v.cwd] if v is not None and v.cwd else []) + [base, *base.parents] + [Path.cwd()]
    return next(((d / p).resolve() for d in places if is_file(d / p)), None) or _given(p)


def _given(p: Path) -> Path | None:
    """The file given beside the one naming `p` (GIVEN) whose path ends the most like `p` (`examples/x.yaml` is a
    given `.../x.yaml`): the user's copy of a file their script names from another machine's folders."""
    tail = p.parts[::-1]

    def shared(g: Path) -> int:
        return next((i for i, (a, b) in enumerate(zip(g.parts[::-1], tail)) if a != b), min(len(g.parts), len(tail)))

    hits = [g for g in GIVEN.get() if g.name == p.name and is_file(g)]
    return max(hits, key=shared).resolve() if hits else None
