"""A Memory's lifecycle: forget, supersedes reads, save and load, and the durable write path."""

from __future__ import annotations

import errno
import json
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from jevmem._core import MemoryStore
from jevmem.controller.types import ControllerError, SystemOne
from jevmem.embed import Embedder, embedder_from_spec, embedder_spec, spec_for
from jevmem.errors import (
    DurabilityError,
    InvalidConfigError,
    InvalidInputError,
    InvalidTypeError,
    JevmemError,
    SnapshotError,
)
from jevmem.plane.config import MemoryConfig, SummariserLike, count_setting, memory_config
from jevmem.plane.derived import decode_derived
from jevmem.plane.filters import holds_no_condition
from jevmem.plane.state import MemoryState, check_controller, check_embedder
from jevmem.plane.text import drop_text_caches

#: the class a classmethod constructor is called on (`jevmem.Memory`)
SelfMemory = TypeVar("SelfMemory", bound="LifecycleMemory")


def decode_state(raw: bytes, where: str) -> dict[str, Any]:
    """A memory's own state as JSON bytes (empty: nothing recorded)."""
    if not raw:
        return {}
    try:
        state = json.loads(raw)
    except ValueError as exc:
        raise SnapshotError(f"{where}: memory state is not valid JSON: {exc}") from None
    if not isinstance(state, dict):
        raise SnapshotError(f"{where}: memory state is not a JSON object")
    return state


def _count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _is_decision(d: object) -> bool:
    """A consolidation decision as `forget` and `_with_summaries` read it."""
    if not isinstance(d, dict):
        return False
    ids = [d.get("focus"), d.get("summary_id")]
    nbrs = d.get("neighbours", [])
    return (
        all(i is None or _count(i) for i in ids)
        and isinstance(nbrs, list)
        and all(_count(i) for i in nbrs)
    )


def check_state(state: Mapping[str, Any], where: str, *, delta: bool = False) -> None:
    """Refuse a saved state (or a log record's delta) whose fields have the
    wrong shape: a file whose checksums hold may still be crafted, and a
    bad field would otherwise surface later as a stray TypeError."""
    bad: str | None = None
    fmt = state.get("format", 1)
    if not delta and (not _count(fmt) or fmt != 1):
        bad = f"state format {fmt!r:.40} is not supported (this build reads 1)"
    elif "embedder" in state and not isinstance(state["embedder"], str):
        bad = "embedder is not a string"
    elif "writes" in state and not _count(state["writes"]):
        bad = "writes is not a non-negative integer"
    elif "calls" in state and not (
        isinstance(state["calls"], dict) and all(_count(v) for v in state["calls"].values())
    ):
        bad = "calls is not a mapping of non-negative integers"
    for key in ("decisions", "decisions_all"):
        v = state.get(key, [])
        if bad is None and not (isinstance(v, list) and all(_is_decision(d) for d in v)):
            bad = f"{key} is not a list of consolidation decisions"
    if bad is not None:
        raise SnapshotError(f"{where}: {bad}")


def manifest_embedder(path: Path) -> str | None:
    """The embedder a memory directory names, read before opening it."""
    try:
        manifest = json.loads((path / "MANIFEST").read_text())
    except (FileNotFoundError, NotADirectoryError):
        return None  # no memory there yet: opening it says what is in the way
    except (OSError, ValueError) as exc:
        raise SnapshotError(f"{path}/MANIFEST is not readable: {exc}") from None
    name = manifest.get("embedder") if isinstance(manifest, dict) else None
    return name if isinstance(name, str) else None


@contextmanager
def _naming(path: str | os.PathLike[str]) -> Iterator[None]:
    """The core's I/O errors with the path the caller gave: the core knows
    the error (a FileNotFoundError, a PermissionError) but not the name."""
    try:
        yield
    except SnapshotError as exc:
        # the core names a file inside a memory's directory, not where it is
        if os.fspath(path) in str(exc):
            raise
        raise SnapshotError(f"{os.fspath(path)}: {exc}") from None
    except OSError as exc:
        if isinstance(exc, JevmemError) or exc.errno is None or exc.filename is not None:
            raise
        raise type(exc)(exc.errno, exc.strerror, os.fspath(path)) from None


def _path_arg(path: object, what: str) -> Path:
    """``path`` as a Path; an empty string is refused (``Path("")`` is the
    current directory, which `open` would make a memory of)."""
    if isinstance(path, str | os.PathLike) and not isinstance(path, bytes):
        if isinstance(path, str) and not path.strip():
            raise InvalidInputError(f"{what}: the path is empty")
        return Path(path)
    raise InvalidTypeError(f"{what}: path must be a str or os.PathLike, got {type(path).__name__}")


@contextmanager
def _durability(path: str | os.PathLike[str] | None, action: str) -> Iterator[None]:
    """A durable memory's failed checkpoint or close (a full disk, a failed
    fsync) as a DurabilityError, still an OSError with the errno, strerror
    and file name. The memory stays open: every write is still in the log,
    a later checkpoint or close may succeed, and reopening recovers."""
    try:
        yield
    except OSError as exc:
        if isinstance(exc, JevmemError):
            raise
        if exc.errno is None:
            raise DurabilityError(f"{action} of {path} failed: {exc}") from exc
        where = exc.filename if exc.filename is not None else path
        where = os.fspath(where) if where is not None else None
        raise DurabilityError(exc.errno, exc.strerror, where) from exc


def _check_parts(embedder: object, controller: object) -> None:
    """The checks the constructor makes, before a file is read or a directory made."""
    if embedder is not None:
        check_embedder(embedder)
    if controller is not None:
        check_controller(controller)


class LifecycleMemory(MemoryState):
    """Forgetting, versions of facts, persistence and durable writes."""

    # ---- facts that change: what the memory knows about replaced facts ---------

    def validity(self, node_id: int) -> tuple[int | None, int | None]:
        """``(valid_from, valid_to)`` of a node's fact on the world timeline
        (not when it was recorded): from when its text says it began (the
        first time it names, "I moved to Porto last week"; else its
        timestamp) to when the earliest observation that replaced it began;
        ``valid_to`` is None while it is current. Ids as in `history`."""
        return self.store.validity(self._live_id(node_id))

    def superseded_by(self, node_id: int) -> list[int]:
        """The observations that updated, replaced or contradicted this one
        (ids as in `history`)."""
        return self.store.superseded_by(self._live_id(node_id))

    def supersedes(self, node_id: int) -> list[int]:
        """The observations this one updated, replaced or contradicted (ids
        as in `history`)."""
        return self.store.supersedes(self._live_id(node_id))

    def history(self, node_id: int) -> list[int]:
        """The versions of a fact up to this node, newest first: this node,
        then every fact it replaced, transitively, each version before every
        version it replaced (after ``b = update(a, ...)``, ``c = update(b,
        ...)``: ``history(c) == [c, b, a]``, also where the controller linked
        c to a directly). The versions that replaced it are `superseded_by`. A forgotten
        version is gone from the chain (see `forget`). Raises
        NodeNotFoundError for an unknown or forgotten id, InvalidInputError
        for one that is not an int."""
        return self.store.history(self._live_id(node_id))

    # ---- forget -----------------------------------------------------------------

    def forget(
        self,
        ids: int | Iterable[int] | None = None,
        *,
        scope: Mapping[str, str] | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> int:
        """Remove observations for real; returns how many nodes were removed.

        What goes: the ``ids`` given, or every observation a ``scope`` and/or
        ``filter`` select (as `search` and `list` read them: forgetting
        ``scope={"user": "u1"}`` removes all of u1's observations). Give one
        or the other; a bare ``forget()`` is refused rather than read as
        "everything".

        The nodes leave every index, the graph (with their edges), the
        supersedes table and every derived structure of this Memory, so no
        later search, `search_batch`, `neighbors`, timeline walk, `history`,
        `stats` or `save` sees them; the next `save` writes a snapshot without
        their text. Summaries the consolidation wrote from a forgotten node
        (``Memory(summariser=...)``) are forgotten with it (they repeat its
        text) and count in the result; consolidation decisions that name a
        forgotten node are dropped; process-wide caches keyed by texts are
        emptied.

        Supersedes chains: forgetting the newest version of a fact makes the
        one it replaced current again (as if the update had never been
        observed); forgetting the oldest leaves the newer one as it was;
        forgetting one in the middle links the versions around it directly,
        so the older ones stay superseded (`MemoryStore.forget`).

        ``ids``: an int or an iterable of ints. An id that is not an int, is
        listed twice, or names no node (never added or already forgotten)
        raises InvalidInputError or NodeNotFoundError, and nothing is removed.

        A selection that restricts nothing (an empty ``scope``, a ``filter``
        with no condition such as ``{}`` or ``{"$and": []}``, and nothing else)
        is refused as a bare ``forget()`` is.

        Searches on other threads are not cut short: a forget waits for the
        searches running to finish and holds new ones back until it is done
        (`jevmem.plane.removal_gate`). Called from inside a search's own
        controller round, it raises InvalidInputError.
        """
        self._sync_with_store()
        by_selection = scope is not None or filter is not None
        if by_selection == (ids is not None):
            raise InvalidInputError(
                "forget needs either ids or a scope/filter (not both, not neither)"
            )
        if (
            by_selection
            and (scope is None or (isinstance(scope, Mapping) and not scope))
            and (filter is None or holds_no_condition(filter))
        ):
            # an empty scope, a filter without a condition: everything, most
            # likely a value the caller forgot to fill in
            raise InvalidInputError(
                "forget: an empty scope and a filter with no condition select every "
                "observation; give ids, or a scope or filter that names what to forget"
            )
        # no search runs while nodes go: it reads the store call by call.
        # The write lock first, then the gate: a write that takes back its
        # nodes (its controller failed) holds the one and waits for the other
        with self._writing(), self._removal_gate.removal():
            live = self.matching_ids(scope, filter) if by_selection else self._live_ids(ids)
            with self._durable_write():  # one log record; gone from disk at the next checkpoint
                return self._forget_ids(live) if live else 0

    def _forget_ids(self, ids: list[int]) -> int:
        """Forget validated ids (distinct, live); how a scope or filter
        removes what it matched too."""
        gone = self._with_summaries(ids)
        self.store.forget(gone)
        self._forget_python_side()
        gone_set = set(gone)
        self._drop_decisions(gone_set.__contains__)
        drop_text_caches()
        self._removed_seen = self.store.removed_count
        return len(gone)

    def _with_summaries(self, ids: list[int]) -> list[int]:
        """``ids`` and the live summaries written from any of them (or from
        such a summary, transitively): a summary repeats its sources' text."""
        gone = list(ids)
        seen = set(ids)
        grew = True
        while grew:
            grew = False
            for d in self.decisions:
                sid = d.get("summary_id")
                if sid is None or sid in seen or sid not in self.store:
                    continue
                if d.get("focus") in seen or not seen.isdisjoint(d.get("neighbours", ())):
                    gone.append(sid)
                    seen.add(sid)
                    grew = True
        return gone

    # ---- persistence ------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        """Export the memory to one file (atomic): the store's snapshot with
        the memory's own state (embedder, consolidation decisions) inside."""
        self._sync_with_store()
        path = _path_arg(path, "save")
        with self._writing(), _naming(path):
            self.store.save_with_state(path, self._state_bytes())

    @classmethod
    def load(
        cls: type[SelfMemory],
        path: str | Path,
        embedder: Embedder | None = None,
        controller: SystemOne | None = None,
        *,
        config: MemoryConfig | None = None,
        max_absent_ids: int | None = None,
    ) -> SelfMemory:
        """Import a file written by :meth:`save` (or a bare store snapshot,
        with the side files older versions wrote beside it). Without
        ``embedder`` the one the file names is made; another one than it
        names is refused (InvalidConfigError), as :meth:`open` refuses it.
        ``max_absent_ids``:
        how many removed ids the file may claim, for a memory of yours that
        forgot more nodes than the default bound (sized from the file, so a
        crafted file cannot claim billions) admits; the refusal names it."""
        path = _path_arg(path, "load")
        _check_parts(embedder, controller)
        if max_absent_ids is not None:
            count_setting("max_absent_ids", max_absent_ids, 0, "a non-negative integer")
        with _naming(path):
            store, raw = MemoryStore.load_with_state(path, max_absent_ids=max_absent_ids)
        state: dict[str, Any] = {}
        if raw is not None:
            state = decode_state(raw, f"{path}")
        else:  # a bare snapshot: older builds kept this beside it
            side_path = path.with_name(path.name + ".decisions.json")
            meta_path = path.with_name(path.name + ".meta.json")
            try:
                if side_path.exists():
                    state.update(json.loads(side_path.read_text()))
                if meta_path.exists():
                    state.setdefault("embedder", json.loads(meta_path.read_text()).get("embedder"))
            except (OSError, ValueError) as exc:
                raise SnapshotError(f"{path}: unreadable side file: {exc}") from None
        check_state(state, f"{path}")
        named = state.get("embedder")
        if embedder is None and isinstance(named, str):
            embedder = embedder_from_spec(named)
        elif embedder is not None and isinstance(named, str) and named != "default":
            # (older side files wrote "default" for any embedder they could not name)
            given = spec_for(embedder, named)
            if given != named:
                raise InvalidConfigError(
                    f'{path} was made with embedder "{named}" (dimension {store.dim}); '
                    f'this one is "{given}" (dimension {getattr(embedder, "dim", None)})'
                )
        m = cls(
            embedder,
            controller,
            config=config,
            store=store,
            _derived=decode_derived(state.get("derived")),
        )
        m._apply_state(state)
        return m

    # ---- durability ---------------------------------------------------------

    @classmethod
    def open(
        cls: type[SelfMemory],
        path: str | Path,
        embedder: Embedder | None = None,
        controller: SystemOne | None = None,
        *,
        config: MemoryConfig | None = None,
        summariser: SummariserLike | None = None,
        durability: str = "sync",
        salvage: bool = False,
        checkpoint_every: int = 20_000,
        max_absent_ids: int | None = None,
    ) -> SelfMemory:
        """Open (or create) a durable memory in directory ``path``.

        Every acknowledged write is in the directory's write-ahead log:
        ``durability="sync"`` (default) returns from a write once its record
        is fsynced (concurrent writers share fsyncs); ``"interval:MS"`` once
        it is written to the OS, fsynced every MS milliseconds (an OS crash
        can lose the last MS); ``"none"`` fsyncs only at checkpoints and
        :meth:`close` (a process crash loses nothing, power loss can). A
        failed fsync makes the memory read-only (:class:`DurabilityError`).

        Opening replays the log after the last checkpoint and cuts a torn
        tail; a bad record followed by good ones refuses to open unless
        ``salvage=True``, which drops it and what follows (kept aside in the
        directory) and says so in :attr:`recovery`. The directory names its
        embedder: without ``embedder`` that one is made; another one is
        refused. A checkpoint is taken every ``checkpoint_every`` log records
        (0: only on :meth:`checkpoint` and :meth:`close`). ``max_absent_ids``
        as in :meth:`load`.

        A memory past the exact vector tier opens without rebuilding its
        HNSW graph: the vectors wait in a pending list that searches scan
        exactly (complete results, slower per query) while a background
        thread builds the graph; ``memory.store.pending_graph`` counts what
        is left and ``memory.store.finish_graph()`` waits for it.
        """
        path = _path_arg(path, "open")
        _check_parts(embedder, controller)
        count_setting("checkpoint_every", checkpoint_every, 0, "a non-negative integer")
        if max_absent_ids is not None:
            count_setting("max_absent_ids", max_absent_ids, 0, "a non-negative integer")
        if not isinstance(durability, str):
            raise InvalidTypeError(f"durability must be a str, got {type(durability).__name__}")
        if not isinstance(salvage, bool):
            raise InvalidTypeError(f"salvage must be a bool, got {type(salvage).__name__}")
        if path.exists() and not path.is_dir():
            raise NotADirectoryError(
                errno.ENOTDIR,
                "not a directory (Memory.open takes a memory's directory, Memory.load a saved file)",
                os.fspath(path),
            )
        named = manifest_embedder(path)
        if embedder is None:
            embedder = embedder_from_spec(named or "default")
        config = memory_config(config)
        spec = spec_for(embedder, named)
        initial = json.dumps({"format": 1, "embedder": spec}).encode()
        with _naming(path):
            store, raw_state, deltas, report = MemoryStore.open(
                path,
                embedder.dim,
                embedder=spec,
                state=initial,
                durability=durability,
                salvage=salvage,
                max_text_bytes=config.max_text_bytes,
                max_absent_ids=max_absent_ids,
            )
        try:
            state = decode_state(raw_state, f"{path} checkpoint")
            check_state(state, f"{path} checkpoint")
            replayed = [decode_state(d, f"{path} log record") for d in deltas]
            for k, d in enumerate(replayed, 1):
                check_state(d, f"{path} log record {k} after the checkpoint", delta=True)
            # what the checkpoint and the log records derived, before indexing
            derived = decode_derived(state.get("derived"))
            for d in replayed:
                derived.update(decode_derived(d.get("derived")))
            m = cls(
                embedder,
                controller,
                config=config,
                summariser=summariser,
                store=store,
                _derived=derived,
            )
            m._apply_state(state)
            for d in replayed:
                m._apply_delta(d)
        except BaseException:
            store.close()
            raise
        m._checkpoint_every = checkpoint_every
        m._checkpoint_seq = int(report["checkpoint_seq"])
        m.recovery = dict(report)
        return m

    @property
    def durable(self) -> bool:
        """Whether this memory lives in a directory (see :meth:`open`)."""
        return bool(self.store.durable)

    def checkpoint(self) -> dict[str, Any]:
        """Write a checkpoint of a durable memory now: reopening then replays
        only later writes, and the log it covers is deleted (with it, the
        text of forgotten observations)."""
        with self._writing(), _durability(self.store.path, "checkpoint"):
            report = dict(self.store.checkpoint(self._state_bytes()))
            self._checkpoint_seq = int(report["seq"])
            return report

    def close(self) -> None:
        """Checkpoint (when anything was written since the last) and close a
        durable memory; reads still work, writes raise. A no-op in memory."""
        if not self.durable:
            return
        with self._writing(), _durability(self.store.path, "close"):
            if self.store.failure is None and self.store.last_seq != self._checkpoint_seq:
                self.checkpoint()
            self.store.close()

    def __enter__(self: SelfMemory) -> SelfMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _state(self) -> dict[str, Any]:
        return {
            "format": 1,
            "embedder": embedder_spec(self.embedder),
            "writes": self._writes,
            "decisions": self.decisions,
            "calls": self.calls,
        }

    def _state_bytes(self) -> bytes:
        return json.dumps(self._state(), separators=(",", ":")).encode()

    def _apply_state(self, state: Mapping[str, Any]) -> None:
        self._writes = int(state.get("writes", 0))
        self.decisions = list(state.get("decisions", []))
        calls = state.get("calls")
        if isinstance(calls, dict):
            self.calls = {"write": int(calls.get("write", 0)), "query": int(calls.get("query", 0))}

    def _apply_delta(self, delta: Mapping[str, Any]) -> None:
        self._writes += int(delta.get("writes", 0))
        for k, n in delta.get("calls", {}).items():
            self.calls[k] = self.calls.get(k, 0) + int(n)
        if "decisions_all" in delta:  # a forget rewrote the list
            self.decisions = list(delta["decisions_all"])
        self.decisions.extend(delta.get("decisions", []))

    def _write_record(self, before: tuple[int, int, int]) -> bytes:
        """The log record of the memory's own state changes since ``before``
        (writes, decisions, write calls), as JSON."""
        writes, decided, calls = before
        delta: dict[str, Any] = {}
        if self._writes != writes:
            delta["writes"] = self._writes - writes
        if self.calls["write"] != calls:  # the write path's controller calls
            delta["calls"] = {"write": self.calls["write"] - calls}
        if self._decisions_rewritten:
            delta["decisions_all"] = self.decisions
        elif len(self.decisions) != decided:
            delta["decisions"] = self.decisions[decided:]
        return json.dumps(delta, separators=(",", ":")).encode() if delta else b""

    def _end_write(self, before: tuple[int, int, int], first_id: int) -> int | None:
        """Log the write opened by ``store._begin_write`` (logged even when the
        request failed half way: the log always holds what the memory holds).
        A record that cannot be encoded takes the write back, as a failed add
        is taken back, and raises ControllerError; the write is closed in
        every case, or each later one would find it open."""
        try:
            record = self._write_record(before)
        except Exception as exc:
            try:
                self._take_back(before, first_id)
                record = self._write_record(before)
            except BaseException:
                self._decisions_rewritten = False
                self.store._log_write(b"")
                raise
            self._decisions_rewritten = False
            self.store._log_write(record)
            raise ControllerError(
                f"the write's record could not be encoded ({type(exc).__name__}: {exc}); "
                "the write was taken back"
            ) from exc
        self._decisions_rewritten = False
        return self.store._log_write(record)

    def _take_back(self, before: tuple[int, int, int], first_id: int) -> None:
        """Undo what a write request added: its nodes (with their edges and
        summaries), its decisions and its count of writes (its controller
        calls were made, and stay counted as a failed add's do)."""
        writes, decided, _ = before
        self._writes = writes
        del self.decisions[decided:]
        added = [i for i in range(first_id, self.store.next_id) if i in self.store]
        if added:
            with self._removal_gate.removal():
                self._forget_ids(added)

    @contextmanager
    def _durable_write(self) -> Iterator[None]:
        """One write request. On a durable memory its store calls become one
        log record (with the memory's own state changes); the request
        returns once that record is durable. Re-entrant: a request made of
        others (update = add + link) is still one record."""
        if not self.store.durable:
            if self.store.closed:
                raise DurabilityError("the memory is closed")
            yield
            return
        seq: int | None = None
        with self._writing():
            outer = self._write_depth == 0
            if outer:
                self.store._begin_write()
                before = (self._writes, len(self.decisions), self.calls["write"])
                first_id = self.store.next_id
            self._write_depth += 1
            try:
                yield
            finally:
                self._write_depth -= 1
                if outer:
                    seq = self._end_write(before, first_id)
        if seq is not None:
            self.store._wait_durable(seq)
            last = self.store.last_seq or 0
            since = max(self._checkpoint_seq, self._checkpoint_failed_seq)
            if self._checkpoint_every and last - since >= self._checkpoint_every:
                try:
                    self.checkpoint()
                except JevmemError as exc:
                    # the write is acknowledged (its record is durable): failing
                    # it now would invite a retry that writes it twice. Try
                    # again after as many records; close() tries at once.
                    self._checkpoint_failed_seq = last
                    warnings.warn(
                        f"automatic checkpoint failed ({exc}); every write is still in "
                        "the write-ahead log",
                        RuntimeWarning,
                        stacklevel=4,
                    )
