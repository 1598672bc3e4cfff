"""Shell text split into commands and words as bash splits it, without running anything: quotes, `\\`
continuations, comments, here-documents (skipped, but for one `read` into a variable: read_heredoc), redirections (dropped), `;` `&&` `|` `&` between commands, and the
brackets of `$( )`, `${ }` and `"..."` matched across lines. shellvars expands the words; shell walks the commands.
"""

from __future__ import annotations

import re

from planner.errors import BadInput
from planner.intake import limits


# -- matching brackets ------------------------------------------------------------------
def nest(level: int) -> int:
    """The next level of quotes and brackets within one another; refused past limits.MAX_SHELL_NESTING."""
    if level >= limits.MAX_SHELL_NESTING:
        limits.refuse(
            f'quotes and substitutions ($( ), ${{ }}, "...") nested deeper than {limits.MAX_SHELL_NESTING} levels '
            f"(memplan reads up to {limits.MAX_SHELL_NESTING})"
        )
    return level + 1


def paren_end(s: str, i: int, level: int = 0) -> int:
    """Index after the `)` that closes the `(` at i, skipping quotes and nested substitutions."""
    level, depth, j = nest(level), 0, i
    while j < len(s):
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c == "'":
            end = s.find("'", j + 1)
            j = len(s) if end < 0 else end + 1
            continue
        if c == '"':
            j = dq_end(s, j, level)
            continue
        depth += (c == "(") - (c == ")")
        j += 1
        if depth == 0:
            return j
    return len(s)


def dq_end(s: str, i: int, level: int = 0) -> int:
    """Index after the `"` that closes the one at i (the end of s where none does)."""
    end = dq_close(s, i, level)
    return len(s) if end is None else end


def dq_close(s: str, i: int, level: int = 0) -> int | None:
    """Index after the `"` that closes the one at i; None where none does."""
    level, j = nest(level), i + 1
    while j < len(s):
        if s[j] == "\\":
            j += 2
        elif s[j] == '"':
            return j + 1
        elif s.startswith("$(", j):
            j = paren_end(s, j + 1, level)
        elif s.startswith("${", j):
            j = brace_end(s, j + 1, level)
        else:
            j += 1
    return None


def brace_end(s: str, i: int, level: int = 0) -> int:
    level, depth, j = nest(level), 0, i
    while j < len(s):
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c in "'\"":
            j = dq_end(s, j, level) if c == '"' else (s.find("'", j + 1) + 1 or len(s))
            continue
        depth += (c == "{") - (c == "}")
        j += 1
        if depth == 0:
            return j
    return len(s)


# a placeholder in a posted script (`--image_root <your_image_root>`, `<path to model>`): a value to fill in, not a
# redirection (bash would fail on it; read as one, it would swallow the next flag)
_PLACEHOLDER = re.compile(r"<[A-Za-z][^<>\n]*>(?=[ \t\r\n\\\"']|$)")
_PLAIN = re.compile(r"[^ \t\r\n;&|<>()'\"$`\\]*")  # characters that only extend the word being read


# -- splitting ----------------------------------------------------------------------------------------------------
class _Lexer:
    """Raw commands: lists of (word as written, line)."""

    def __init__(self, text: str, where: str = "") -> None:
        self.s, self.i, self.line, self.where = text, 0, 1, where
        self.commands: list[list[tuple[str, int]]] = []
        self.words: list[tuple[str, int]] = []
        self.cur: list[str] | None = None  # the word being read, in pieces (joined once: no quadratic copying)
        self.cur_line = 1
        self.heredocs: list[tuple[str, bool]] = []
        self.drop_next = False
        # comment lines that end a command a `\` continued: (the command's index, the comment's line, its text)
        self.cuts: list[tuple[int, int, str]] = []

    def run(self) -> list[list[tuple[str, int]]]:
        s = self.s
        while self.i < len(s):
            ch = s[self.i]
            if ch == "\\" and s.startswith("\n", self.i + 1):
                self.i, self.line = self.i + 2, self.line + 1
            elif ch in " \t\r":
                self._end_word()
                self.i += 1
            elif ch == "\n":
                self._end_command()
                self.i, self.line = self.i + 1, self.line + 1
                self._skip_heredocs()
            elif ch == "#" and self.cur is None:
                end = s.find("\n", self.i)
                end = len(s) if end < 0 else end
                if self.words and self._after_continuation():
                    self.cuts.append((len(self.commands), self.line, s[self.i : end]))
                self.i = end
            elif ch == "<" and self.cur is None and (m := _PLACEHOLDER.match(s, self.i)):
                self._take(m.end())
            elif ch in "<>" or s.startswith("&>", self.i):
                self._redirect()
            elif ch in ";&|":
                self._end_command()
                self.i += 2 if s[self.i : self.i + 2] in ("&&", "||", ";;", "|&") else 1
            elif ch in "()" and not (ch == "(" and self.cur is not None and self.cur[-1].endswith("=")):
                self._end_word()
                self.words.append((ch, self.line))
                self.i += 1
            else:
                self._part()
        self._end_command()
        return self.commands

    def _after_continuation(self) -> bool:
        """Whether the line being read began after a `\\` that continued the command (blanks before self.i)."""
        start = self.s.rfind("\n", 0, self.i)
        return start > 0 and self.s[start - 1] == "\\" and not self.s[start + 1 : self.i].strip(" \t")

    def _take(self, end: int) -> None:
        chunk = self.s[self.i : end]
        if self.cur is None:
            self.cur, self.cur_line = [], self.line
        self.cur.append(chunk)
        self.line += chunk.count("\n")
        self.i = end

    def _part(self) -> None:
        s, i = self.s, self.i
        if s[i] == "'":
            end = s.find("'", i + 1)
            self._take(self._closed("'", None if end < 0 else end + 1))
        elif s[i] == '"':
            self._take(self._closed('"', dq_close(s, i)))
        elif s.startswith("$(", i) or (s[i] == "(" and self.cur is not None):
            self._take(paren_end(s, i + 1 if s[i] == "$" else i))
        elif s.startswith("${", i):
            self._take(brace_end(s, i + 1))
        elif s[i] == "`":
            end = s.find("`", i + 1)
            self._take(self._closed("`", None if end < 0 else end + 1))
        elif s[i] == "\\":
            self._take(min(i + 2, len(s)))
        else:
            self._take(_PLAIN.match(s, i + 1).end())

    def _closed(self, quote: str, end: int | None) -> int:
        """`end`, or a one-line refusal where the quote is never closed (bash: "unexpected EOF while looking for
        matching"): read on, the rest of the script would be one word and its flags silently lost."""
        if end is None:
            raise BadInput(
                f"{self.where}line {self.line}: No closing quotation (the {quote} opened there is never closed)",
                "config",
            )
        return end

    def _redirect(self) -> None:
        if self.cur is not None and "".join(self.cur).isdigit():
            self.cur = None  # `2>&1`: the 2 is the descriptor, not a word
        self._end_word()
        m = re.compile(r"&?[<>]+-?&?[0-9-]?").match(self.s, self.i)
        op = m.group(0)
        self.i = m.end()
        if op.startswith("<<") and not op.startswith("<<<"):
            m = re.compile(r"[ \t]*(['\"]?)([A-Za-z_0-9]+)\1").match(self.s, self.i)
            if m:
                self.heredocs.append((m.group(2), op.endswith("-"), bool(m.group(1)), len(self.commands)))
                self.i = m.end()
        elif not re.search(r"&[0-9-]$", op):
            self.drop_next = True  # the redirection's target is no argument

    def _skip_heredocs(self) -> None:
        for delim, strip, quoted, index in self.heredocs:
            body = []
            while self.i < len(self.s):
                end = self.s.find("\n", self.i)
                end = len(self.s) if end < 0 else end
                text = self.s[self.i : end]
                self.i, self.line = end + 1, self.line + 1
                if (text.strip() if strip else text.rstrip("\r")) == delim:
                    break
                body.append(text.lstrip("\t") if strip else text)
            if index < len(self.commands):
                self.commands[index] = read_heredoc(self.commands[index], "\n".join(body), quoted)
        self.heredocs = []

    def _end_word(self) -> None:
        if self.cur is not None:
            if not self.drop_next:
                self.words.append(("".join(self.cur), self.cur_line))
            self.drop_next = False
        self.cur = None

    def _end_command(self) -> None:
        self._end_word()
        if self.words:
            self.commands.append(self.words)
        self.words = []


# `read`'s options that take a value (bash 5.2 builtins/read.def: -a -d -i -n -N -p -t -u)
_READ_VALUED = {"-a", "-d", "-i", "-n", "-N", "-p", "-t", "-u"}


def read_heredoc(cmd: list[tuple[str, int]], body: str, quoted: bool) -> list[tuple[str, int]]:
    """`read [-r] [-d ''] NAME <<EOF ... EOF`, the here-document read into one variable (a command line kept in a
    variable: OpenRLHF's examples/scripts), as the assignment `NAME="body"` bash's read makes: with `-d ''` the whole
    body (read stops at a NUL), else its first line, blanks trimmed at both ends; an unquoted delimiter's body has its
    `\\`-newlines joined and its `$` expanded as in double quotes, a quoted one's is literal. Any other command is
    returned as it is (its here-document is stdin, not an argument)."""
    if not cmd or cmd[0][0] != "read":
        return cmd
    names, whole, i = [], False, 1
    while i < len(cmd):
        word = cmd[i][0]
        if word in _READ_VALUED:
            whole = whole or (word == "-d" and i + 1 < len(cmd) and cmd[i + 1][0] in ("''", '""'))
            i += 2
            continue
        if not word.startswith("-"):
            names.append(word)
        i += 1
    if len(names) != 1 or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", names[0]):
        return cmd
    text = body if quoted else body.replace("\\\n", "")
    text = (text if whole else text.split("\n", 1)[0]).strip(" \t\n")
    value = "'" + text.replace("'", "'\\''") + "'" if quoted else '"' + text.replace('"', '\\"') + '"'
    return [(f"{names[0]}={value}", cmd[0][1])]


def split_commands(
    text: str, where: str = "", cuts: list[tuple[int, int, str]] | None = None
) -> list[list[tuple[str, int]]]:
    """The commands of `text`; `where` ("--config run.sh ") begins the line that refuses an unclosed quote; `cuts`
    collects the comment lines that end a command a `\\` continued (bash ends it there), as (the index of the command,
    the comment's line, its text)."""
    lexer = _Lexer(text, where)
    commands = lexer.run()
    if cuts is not None:
        cuts += lexer.cuts
    return commands


_ASSIGNS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")


def cut_lines(commands: list[list[tuple[str, int]]], cuts: list[tuple[int, int, str]], name: str) -> list[str]:
    """Bash ends a command at a comment line even after a `\\` (the comment runs to the line's end, and its newline
    ends the command): one line for each such cut that changes what runs, where the comment itself ends in `\\`,
    the cut command only sets variables (an environment prefix: they become shell variables, not the next command's
    environment), or the next command begins with an option (the rest of the cut command's arguments)."""
    out = []
    for index, line, comment in cuts:
        cut = commands[index] if index < len(commands) else []
        after = commands[index + 1] if index + 1 < len(commands) else []
        prefix = bool(cut) and all(_ASSIGNS.match(w) for w, _ in cut)
        if not cut or not (comment.rstrip().endswith("\\") or prefix or (after and after[0][0].startswith("-"))):
            continue
        head = " ".join(w for w, _ in cut[:2]) + (" ..." if len(cut) > 2 else "")
        if prefix and after:
            what = f"{head} sets shell variables, not the environment of line {after[0][1]}'s {after[0][0]}"
        else:
            rest = " ".join(w for w, _ in after[:3]) + (" ..." if len(after) > 3 else "")
            what = f"{head} ends there" + (f"; line {after[0][1]}'s {rest} is a command of its own" if after else "")
        out.append(
            f"{name}:{line} the comment line ends the command begun on line {cut[0][1]}, as bash ends it (a `\\` "
            f"does not continue past a comment): {what}"
        )
    return out
