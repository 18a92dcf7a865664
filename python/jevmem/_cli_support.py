"""What the command-line modules share (`jevmem.cli` and the subcommands
it registers: answer, inspect, serve): opening and saving a memory named on
the command line, embedders by name, ``--scope`` flags. An internal module:
the subcommands import it, never `jevmem.cli`, so the CLI has no import
cycle."""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from pathlib import Path

from jevmem.embed import Embedder, embedder_from_spec
from jevmem.errors import InvalidConfigError
from jevmem.memory import Memory

__all__ = [
    "DEFAULT_MEMORY",
    "SharedEmbedders",
    "embedder_named",
    "is_directory_memory",
    "is_memory",
    "open_memory",
    "save_memory",
    "scope_flags",
]

DEFAULT_MEMORY = Path("jevmem.jvm")


def embedder_named(name: str, *, spin: bool = True) -> Embedder:
    try:
        return embedder_from_spec(name, spin=spin)
    except InvalidConfigError as exc:
        raise SystemExit(str(exc)) from None


def is_directory_memory(memory: Path) -> bool:
    """A directory (existing, or a new path without the .jvm suffix) is a
    durable memory with a write-ahead log; a .jvm file (any case) is an export."""
    return memory.is_dir() or (not memory.exists() and memory.suffix.lower() != ".jvm")


#: how a file `Memory.save` wrote (or a bare store snapshot) begins
_SNAPSHOT_MAGICS = (b"JEVMEMCK", b"JEVMEMSS")


def is_memory(memory: Path) -> bool:
    """Whether ``memory`` holds a memory already: a directory with a
    MANIFEST (what `Memory.open` writes first), or a snapshot file. The read
    commands (search, answer, inspect) ask this before opening, since
    opening a directory that is not a memory yet would make it one."""
    if memory.is_dir():
        return (memory / "MANIFEST").is_file()
    if not memory.is_file():
        return False
    with memory.open("rb") as f:  # an unreadable file: the OSError names it
        return f.read(8) in _SNAPSHOT_MAGICS


class SharedEmbedders:
    """One embedder per name, made on first use and shared from then on
    (``spin``: as `embedder_from_spec` says)."""

    def __init__(self, *, spin: bool = True) -> None:
        self._spin = spin
        self._made: dict[str, Embedder] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Embedder:
        with self._lock:
            e = self._made.get(name)
            if e is None:
                e = self._made[name] = embedder_named(name, spin=self._spin)
            return e


def open_memory(
    memory: Path,
    embedder: str | None,
    shared: SharedEmbedders | None = None,
    durability: str = "sync",
) -> Memory:
    make = embedder_named if shared is None else shared.get
    chosen = make(embedder) if embedder else None
    if is_directory_memory(memory):
        return Memory.open(memory, chosen, durability=durability)
    if memory.exists():
        return Memory.load(memory, chosen)  # without --embedder: the one the file names
    return Memory(chosen if chosen is not None else make("default"))


def save_memory(m: Memory, memory: Path) -> None:
    """Make the memory's state last: a checkpoint for a directory, an
    atomic one-file export otherwise."""
    if m.durable:
        m.checkpoint()
    else:
        m.save(memory)


def scope_flags(pairs: Sequence[str] | None) -> dict[str, str] | None:
    """``--scope user=u1 --scope session=s3`` as a scope dict."""
    if not pairs:
        return None
    out: dict[str, str] = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep:
            raise SystemExit(f"--scope expects KEY=VALUE, got {p!r}")
        out[k] = v
    return out


#: What a terminal would act on rather than show: C0 controls but tab and
#: line feed, DEL, C1 controls (an escape sequence in a stored text or a
#: model's reply could move the cursor, retitle the window, hide lines).
_TERMINAL_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """``text`` to print on a terminal: each control character it could act
    on written out as its escape (``\\x1b``); the text itself is unchanged
    in the memory and in JSON output."""
    return _TERMINAL_CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
