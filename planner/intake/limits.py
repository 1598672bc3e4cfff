"""The bounds on reading a user's configuration: every reader in planner/intake reads a file a user supplies, and every
file it names (a sourced script, a DeepSpeed JSON, an accelerate YAML, a model's config.json), through this module, so
that no file however built takes more than bounded time and memory. It owns the limits (named below, each with why its
value), the one way a file is opened (`read_config_text`: regular files only, bytes counted while read), the JSON, YAML
and Python loaders that refuse deep nesting and alias bombs, the shell's 64-bit arithmetic, the budget one --config
file's reading spends (`reading`, `spend`) and the one-line refusal (`refuse`, OverLimit) naming the file and the limit.
Outside a `reading` (a reader called alone, as some tests do) the per-item limits hold and the totals are not counted.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache, lru_cache
from pathlib import Path
from typing import NoReturn

from planner.errors import BadInput

MAX_FILE_BYTES = 4 << 20  # one file (the cap before issue 51); the examples under tests/data are 4.3 KiB at most
MAX_READ_BYTES = 32 << 20  # every file one --config reads, a file sourced twice counted twice
MAX_NESTING = 64  # JSON / YAML levels; the example configurations nest 4 at most
MAX_YAML_BYTES = 1 << 20  # a YAML text; PyYAML's pure-Python scanner reads ~1.5 MiB a second
MAX_YAML_NODES = 20_000  # YAML nodes, an alias counted as the nodes it stands for (PyYAML composes ~35,000 a second)
# YAML documents kept parsed (load_yaml): a run's files, read again at each release line it allows, parse once
YAML_PARSES_KEPT = 32
MAX_SCRIPT_BYTES = 1 << 20  # a shell script (launch scripts are kilobytes); memplan's lexer takes ~1 s a MiB
MAX_SHELL_BYTES = 2 << 20  # all the shell text one --config reads: scripts, sourced files, strings run by bash -c
MAX_PY_BYTES = 1 << 20  # a Python training script; ast.parse takes ~0.3 s and ~100 MiB for 1 MiB
MAX_PY_DEPTH = 100  # syntax-tree levels; ast.unparse and literal_eval recurse ~4 frames a level under Python's 1,000
MAX_ARITH_CHARS = 1024  # one $(( )) with its variables put in; launch scripts multiply a few counts
MAX_ARITH_DEPTH = 64  # nested operations in one $(( ))
ARITH_BITS = 64  # bash's intmax_t: -2**63 .. 2**63 - 1 (bash wraps past it; memplan refuses)
MAX_VALUE_BYTES = 64 << 10  # one shell variable's value
MAX_VARIABLES = 256  # shell variables set at once (every command keeps a copy: 5,000 x 256 entries at most)
MAX_EXPANDED_BYTES = 16 << 20  # what $VAR, $( ) and $(( )) expand to, in all the scripts one --config runs
MAX_COMMANDS = 5_000  # shell commands walked, sourced and run scripts included (launch scripts: tens to hundreds)
MAX_WORDS = 100_000  # the words those commands expand to (an unquoted $VAR splits into many)
MAX_SHELL_NESTING = 32  # $( ), ${ } and "..." within one another
MAX_SOURCE_DEPTH = 8  # `source` within sourced scripts
MAX_RUN_DEPTH = 4  # scripts a script runs (`bash x.sh`, `ssh host "..."`, `bash -c`) within one another

TOTALS = {
    "read_bytes": (MAX_READ_BYTES, f"files read (sourced or named) over {MAX_READ_BYTES >> 20} MiB in all"),
    "expanded_bytes": (
        MAX_EXPANDED_BYTES,
        f"shell expansions ($VAR, $( ), $(( ))) over {MAX_EXPANDED_BYTES >> 20} MiB in all",
    ),
    "shell_bytes": (
        MAX_SHELL_BYTES,
        f"shell scripts over {MAX_SHELL_BYTES >> 20} MiB in all (sourced and run ones included)",
    ),
    "commands": (MAX_COMMANDS, f"over {MAX_COMMANDS:,} shell commands (sourced and nested scripts included)"),
    "words": (MAX_WORDS, f"shell commands of over {MAX_WORDS:,} words in all"),
}
_FILE: ContextVar[str | None] = ContextVar("memplan_intake_file", default=None)
_SPENT: ContextVar[dict[str, int] | None] = ContextVar("memplan_intake_spent", default=None)


class OverLimit(BadInput):
    """A file past one of this module's limits, or not a regular file: one line naming the file and the limit. A
    reader that treats other bad input as "not read" lets this one through."""


def refuse(what: str) -> NoReturn:
    top = _FILE.get()
    raise OverLimit(f"--config {top}: {what}" if top else what, "config")


def about(path: Path | str | None) -> str:
    """`name: ` for a file other than the --config being read (a sourced script, a JSON it names); else ""."""
    top = _FILE.get()
    if path is None or (top is not None and Path(top).resolve() == Path(path).resolve()):
        return ""
    return f"{path}: "


@contextmanager
def reading(path: Path | str) -> Iterator[None]:
    """One --config file's reading: the file refusals name, and a fresh budget; inside another reading, that one's."""
    if _SPENT.get() is not None:
        yield
        return
    file, spent = _FILE.set(str(path)), _SPENT.set({})
    try:
        yield
    finally:
        _FILE.reset(file)
        _SPENT.reset(spent)


def spend(kind: str, n: int) -> None:
    """Count `n` of `kind` (a TOTALS key) against this reading's budget; refuse past it."""
    spent = _SPENT.get()
    if spent is None:
        return
    spent[kind] = spent.get(kind, 0) + n
    cap, says = TOTALS[kind]
    if spent[kind] > cap:
        refuse(f"{says} (memplan reads a configuration in bounded time and memory)")


_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a named pipe"))


def read_config_text(path: Path | str, *, errors: str = "strict") -> str:
    """A file's text, newlines as Python's text mode gives them: a regular file only (never /dev/zero or a named
    pipe: opened without blocking and refused in one line), at most MAX_FILE_BYTES counted while it is read. A
    folder raises IsADirectoryError; OSError and UnicodeDecodeError are the caller's to word."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(21, "Is a directory", str(path))
        if not stat.S_ISREG(mode):
            kind = next((k for test, k in _KINDS if test(mode)), "a socket or other special file")
            refuse(f"{about(path)}not a regular file ({kind}; memplan reads configurations from regular files)")
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        refuse(f"{about(path)}over {MAX_FILE_BYTES >> 20} MiB (memplan reads configuration files up to that size)")
    spend("read_bytes", len(data))
    return data.decode("utf-8", errors).replace("\r\n", "\n").replace("\r", "\n")


def _nested_too_deep(kind: str, name: Path | str | None) -> NoReturn:
    refuse(f"{about(name)}{kind} nested deeper than {MAX_NESTING} levels (memplan reads up to {MAX_NESTING})")


def check_depth(data: object, kind: str, name: Path | str | None = None) -> object:
    """`data` (lists and dicts) when it nests MAX_NESTING levels at most, walked without recursion."""
    stack = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            if depth > MAX_NESTING:
                _nested_too_deep(kind, name)
            stack += [(v, depth + 1) for v in (item.values() if isinstance(item, dict) else item)]
    return data


def load_json(text: str, name: Path | str | None = None) -> object:
    """JSON text's value (ValueError where it is not JSON; OverLimit where it nests past MAX_NESTING)."""
    try:
        data = json.loads(text)
    except RecursionError:
        _nested_too_deep("JSON", name)
    return check_depth(data, "JSON", name)


def load_yaml(text: str, name: Path | str | None = None) -> object:
    """A YAML document's value through PyYAML's SafeLoader, composed under MAX_NESTING and MAX_YAML_NODES (an alias
    counted as its anchor's nodes, so the 'billion laughs' is refused before anything is built); yaml.YAMLError or
    ValueError where it is not YAML."""
    if len(text) > MAX_YAML_BYTES:
        refuse(f"{about(name)}YAML of over {MAX_YAML_BYTES >> 20} MiB (memplan reads YAML up to that size)")
    return copy.deepcopy(_composed(text, name))  # the caller's own copy: a reader may change what it is given


@lru_cache(maxsize=YAML_PARSES_KEPT)
def _composed(text: str, name: Path | str | None) -> object:
    """load_yaml's document, parsed once for the lines check --config plans a run's files at (each line reads the
    same files again: planner.checkconfig_lines.hungrier_release); a refusal or an error is not kept."""
    loader = _bounded_loader()(text, name)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


@cache
def _bounded_loader() -> type:
    """SafeLoader whose compose_node counts the levels and the nodes (PyYAML imported on first use)."""
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        def __init__(self, text: str, name: Path | str | None) -> None:
            super().__init__(text)
            self.file, self.depth, self.nodes, self.sizes = name, 0, 0, {}

        def count(self, n: int) -> None:
            self.nodes += n
            if self.nodes > MAX_YAML_NODES:
                refuse(
                    f"{about(self.file)}YAML of over {MAX_YAML_NODES:,} nodes, aliases counted as what they stand "
                    f"for (memplan reads up to {MAX_YAML_NODES:,})"
                )

        def fetch_flow_collection_start(self, token):  # `[` and `{` (the scanner reads ahead through open ones)
            if self.flow_level >= MAX_NESTING:
                _nested_too_deep("YAML", self.file)
            super().fetch_flow_collection_start(token)

        def compose_node(self, parent, index):
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent):
                node = self.anchors.get(event.anchor)
                if node is not None and id(node) not in self.sizes:
                    refuse(f"{about(self.file)}YAML alias *{event.anchor} inside its own anchor (a loop)")
                self.count(self.sizes.get(id(node), 0))
                return super().compose_node(parent, index)
            before = self.nodes
            self.count(1)
            self.depth += 1
            if self.depth > MAX_NESTING:
                _nested_too_deep("YAML", self.file)
            try:
                node = super().compose_node(parent, index)
            finally:
                self.depth -= 1
            if event.anchor is not None:
                self.sizes[id(node)] = self.nodes - before
            return node

    return BoundedLoader


def parse_python(text: str, path: Path) -> ast.Module:
    """A Python script's syntax tree under MAX_PY_BYTES and MAX_PY_DEPTH (SyntaxError / ValueError where it does not
    parse)."""
    if len(text) > MAX_PY_BYTES:
        refuse(f"{about(path)}a Python script over {MAX_PY_BYTES >> 20} MiB (memplan parses scripts up to that size)")
    try:
        tree = ast.parse(text, filename=str(path))
    except (RecursionError, MemoryError):  # CPython's parser: "too complex", or its stack past the limit
        tree = None
    stack = [(tree, 1)] if tree is not None else []
    while stack:
        node, depth = stack.pop()
        if depth > MAX_PY_DEPTH:
            tree = None
            break
        stack += [(child, depth + 1) for child in ast.iter_child_nodes(node)]
    if tree is None:
        refuse(f"{about(path)}Python nested deeper than {MAX_PY_DEPTH} levels (memplan reads up to {MAX_PY_DEPTH})")
    return tree


def shell_variable(name: str, value: str, count: int) -> None:
    """A shell variable about to be set, with `count` variables set then: refused past MAX_VALUE_BYTES or
    MAX_VARIABLES."""
    if len(value) > MAX_VALUE_BYTES:
        refuse(f"shell variable {name}'s value over {MAX_VALUE_BYTES >> 10} KiB (memplan keeps values up to that size)")
    if count > MAX_VARIABLES:
        refuse(f"over {MAX_VARIABLES:,} shell variables set at once (memplan keeps up to that many)")


def arith_text(text: str) -> str:
    """A $(( )) expression, its variables put in, when it is MAX_ARITH_CHARS long at most."""
    if len(text) > MAX_ARITH_CHARS:
        refuse(
            f"$(( ... )) of over {MAX_ARITH_CHARS:,} characters, its variables put in (memplan evaluates up to that)"
        )
    return text


def arith_depth(depth: int) -> None:
    if depth > MAX_ARITH_DEPTH:
        refuse(f"$(( ... )) nested deeper than {MAX_ARITH_DEPTH} operations (memplan evaluates up to that depth)")


def int64(value: int) -> int:
    """`value` where bash's 64-bit arithmetic holds it; refused past it."""
    if -(1 << (ARITH_BITS - 1)) <= value < 1 << (ARITH_BITS - 1):
        return value
    _over_int64()


def _over_int64() -> NoReturn:
    refuse(
        f"arithmetic result over 2**{ARITH_BITS - 1} in $(( ... )) (memplan evaluates shell arithmetic up to "
        f"{ARITH_BITS}-bit values)"
    )


def int64_power(base: int, exponent: int) -> int:
    """base ** exponent under bash's bounds, an exponent too large refused before it is computed (bash refuses a
    negative one: ValueError, the value not known)."""
    if exponent < 0:
        raise ValueError("exponent less than 0")
    if abs(base) > 1 and exponent >= ARITH_BITS:
        _over_int64()
    return int64(base**exponent)
