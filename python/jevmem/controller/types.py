"""Typed, non-generative controller decisions (SPEC §4).

A controller J(S, Q) receives a structured state S and a batch of questions
Q. A :class:`Noul` is one binary proposition, answered by a value in [0, 1];
a :class:`Choice` picks one of several exclusive options and returns the
label with a distribution. Question ids are bookkeeping keys only; ``kind``
is a stable machine-readable name a local controller dispatches on, while a
model-backed controller reads ``instruction`` and the criteria.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from jevmem.errors import JevmemError

__all__ = [
    "PAIR_NOULS",
    "Answer",
    "CandidateAnswers",
    "CandidateQuestions",
    "CandidateTable",
    "Choice",
    "ChoiceAnswer",
    "ControllerError",
    "DecisionRequest",
    "Noul",
    "NoulAnswer",
    "PairAnswers",
    "PairQuestions",
    "PairTable",
    "Question",
    "SystemOne",
    "validate_answers",
]


class ControllerError(JevmemError):
    """A controller returned answers of the wrong shape, range or type."""


@dataclass(frozen=True, slots=True)
class Noul:
    """A binary proposition: is it true of the state? Answer in [0, 1]."""

    id: str
    kind: str
    instruction: str
    true_if: str
    false_if: str


@dataclass(frozen=True, slots=True)
class Choice:
    """Mutually exclusive options; the answer is one label and a distribution."""

    id: str
    kind: str
    instruction: str
    options: tuple[str, ...]
    option_meanings: tuple[str, ...]


Question = Noul | Choice


@dataclass(frozen=True, slots=True)
class NoulAnswer:
    value: float


@dataclass(frozen=True, slots=True)
class ChoiceAnswer:
    label: str
    distribution: Mapping[str, float]


Answer = NoulAnswer | ChoiceAnswer


@dataclass(frozen=True, slots=True)
class DecisionRequest:
    """One state and the questions asked about it.

    ``purpose`` names the decision family (typing, relations, consolidation,
    routing, scoring, assessment); ``state`` holds plain JSON-like data: the
    texts a model would read and the deterministic ``signals`` the memory
    plane computed (similarities, overlaps, time gaps) for fast controllers.
    """

    purpose: str
    state: Mapping[str, Any]
    questions: tuple[Question, ...] = field(default_factory=tuple)


class CandidateTable(Sequence[Mapping[str, Any]]):
    """A round's candidates as columns: ids, texts, views, and one float64
    column per signal, NaN where a candidate lacks that signal.

    To anyone who reads it as a sequence it is the list of candidate
    mappings (``{"id", "text", "view", "signals"}``) it stands for, each built
    on access; a controller that knows the form reads `signal` columns.

    ``texts`` may be a function that returns them: the memory plane passes
    one, so the candidates' texts (pages long, in an agent's log) are only
    read when a controller asks for them.
    """

    __slots__ = ("_texts", "columns", "ids", "views")

    def __init__(
        self,
        ids: Sequence[int],
        texts: Sequence[str] | Callable[[], Sequence[str]],
        columns: Mapping[str, npt.ArrayLike],
        views: Sequence[str] | None = None,
    ) -> None:
        n = len(ids)
        self.ids: list[int] = list(map(int, ids))
        self._texts: list[str] | Callable[[], Sequence[str]] = (
            texts if callable(texts) else list(texts)
        )
        self.views: list[str] = list(views) if views is not None else ["semantic"] * n
        self.columns: dict[str, npt.NDArray[np.float64]] = {
            name: np.asarray(col, dtype=np.float64) for name, col in columns.items()
        }
        if len(self.views) != n:
            raise ValueError(f"{n} ids and {len(self.views)} views")
        if not callable(texts):
            self._check_texts()
        for name, col in self.columns.items():
            if col.shape != (n,):
                raise ValueError(f"signal {name!r} has shape {col.shape}, not ({n},)")

    @classmethod
    def of_plane(
        cls,
        ids: list[int],
        texts: Callable[[], Sequence[str]],
        columns: dict[str, npt.NDArray[np.float64]],
        views: list[str] | None = None,
    ) -> CandidateTable:
        """A table of the memory plane's own columns, taken as they are
        (the constructor's checks and conversions cost as much as a round's
        arithmetic): ``ids`` a list of ints, every column a float64 array as
        long, ``texts`` a function, ``views`` as many. The plane builds them
        so; a test holds every table of a search to what the constructor
        makes of the same parts."""
        table = cls.__new__(cls)
        table.ids = list(ids)
        table._texts = texts
        table.views = views if views is not None else ["semantic"] * len(ids)
        table.columns = dict(columns)
        return table

    def _check_texts(self) -> None:
        got = self._texts
        assert not callable(got)
        if len(got) != len(self.ids):
            raise ValueError(f"{len(self.ids)} ids and {len(got)} texts")

    @property
    def texts(self) -> list[str]:
        """The candidates' texts, in order (read on first use when given as a function)."""
        got = self._texts
        if callable(got):
            self._texts = list(got())
            self._check_texts()
            return self._texts
        return got

    def signal(self, name: str, default: float = 0.0) -> npt.NDArray[np.float64]:
        """One signal of every candidate, ``default`` where it is absent (a new array)."""
        col = self.columns.get(name)
        if col is None:
            return np.full(len(self.ids), default, dtype=np.float64)
        return np.where(np.isnan(col), default, col)

    def present(self, name: str) -> npt.NDArray[np.bool_]:
        """Which candidates carry the signal."""
        col = self.columns.get(name)
        return np.zeros(len(self.ids), dtype=bool) if col is None else ~np.isnan(col)

    def __len__(self) -> int:
        return len(self.ids)

    def _items(self, rows: range) -> list[dict[str, Any]]:
        names = list(self.columns)
        values = [self.columns[name][rows.start : rows.stop : rows.step].tolist() for name in names]
        out = []
        for k, i in enumerate(rows):
            signals = {}
            for name, col in zip(names, values, strict=True):
                v = col[k]
                if v == v:  # NaN: the candidate lacks it
                    signals[name] = v
            item = self._head(i)
            item["signals"] = signals
            out.append(item)
        return out

    def _head(self, i: int) -> dict[str, Any]:
        """Candidate ``i``'s mapping before its signals."""
        return {"id": self.ids[i], "text": self.texts[i], "view": self.views[i]}

    def __getitem__(self, i: Any) -> Any:
        n = len(self.ids)
        if isinstance(i, slice):
            return self._items(range(*i.indices(n)))
        if not -n <= i < n:
            raise IndexError(f"candidate {i} of {n}")
        i %= n
        return self._items(range(i, i + 1))[0]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.as_dicts())

    def as_dicts(self) -> list[dict[str, Any]]:
        """The candidates as plain mappings (what travels as JSON)."""
        return self._items(range(len(self.ids)))

    def __eq__(self, other: object) -> bool:
        # a table equals the candidate mappings it stands for
        if isinstance(other, CandidateTable | list | tuple):
            return self.as_dicts() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable columns, like a list

    def __repr__(self) -> str:
        return f"CandidateTable({len(self.ids)} candidates x {list(self.columns)})"


class PairTable(CandidateTable):
    """A relation round's candidates as columns: a `CandidateTable` of the
    earlier observations paired with a new one, each with its speaker and
    time instead of a view. As a sequence it is the list of mappings
    ``{"id", "text", "speaker", "timestamp", "signals"}`` it stands for."""

    __slots__ = ("speakers", "timestamps")

    def __init__(
        self,
        ids: Sequence[int],
        texts: Sequence[str],
        columns: Mapping[str, npt.ArrayLike],
        speakers: Sequence[str | None],
        timestamps: Sequence[int | None],
    ) -> None:
        super().__init__(ids, texts, columns)
        self.speakers: list[str | None] = list(speakers)
        self.timestamps: list[int | None] = list(timestamps)
        n = len(self.ids)
        if len(self.speakers) != n or len(self.timestamps) != n:
            raise ValueError(
                f"{n} ids, {len(self.speakers)} speakers and {len(self.timestamps)} timestamps"
            )

    def _head(self, i: int) -> dict[str, Any]:
        return {
            "id": self.ids[i],
            "text": self.texts[i],
            "speaker": self.speakers[i],
            "timestamp": self.timestamps[i],
        }

    def __repr__(self) -> str:
        return f"PairTable({len(self.ids)} candidates x {list(self.columns)})"


class CandidateQuestions(tuple[Noul, ...]):
    """The questions of a round over ``n_candidates`` candidates: the same Nouls
    asked of each, candidate by candidate, with ids ``candidate_{i}_<name>``.

    It is a plain tuple of questions to anyone who iterates it. A controller
    that knows the form answers the whole round as columns instead
    (`CandidateAnswers`): one value per candidate and template question,
    without a question or an answer object per cell.
    """

    template: tuple[Noul, ...]  #: candidate 0's questions, in order
    names: tuple[str, ...]  #: the id suffix of each (``relevance``, ...)
    kinds: tuple[str, ...]
    n_candidates: int

    def __new__(cls, per_candidate: Any, count: int) -> CandidateQuestions:
        # per_candidate(i) -> candidate i's questions (a catalogue function)
        template: tuple[Noul, ...] = tuple(per_candidate(0))
        prefix = "candidate_0_"
        if not template or not all(type(q) is Noul and q.id.startswith(prefix) for q in template):
            raise ValueError(
                "a candidate round's template must be Nouls with ids candidate_0_<name>"
            )
        self = super().__new__(cls, (q for i in range(count) for q in per_candidate(i)))
        self.template = template
        self.names = tuple(q.id[len(prefix) :] for q in template)
        self.kinds = tuple(q.kind for q in template)
        self.n_candidates = count
        return self

    @classmethod
    def recognise(cls, questions: Sequence[Question]) -> CandidateQuestions | None:
        """``questions`` as a candidate round when they are one (Nouls with ids
        ``candidate_{i}_<name>``, the same template for every i, candidate by
        candidate), else None: a round that came over the wire is answered
        as columns too."""
        if type(questions) is cls:
            return questions
        width = 0
        for q in questions:
            if not q.id.startswith("candidate_0_"):
                break
            width += 1
        if not width or len(questions) % width:
            return None
        template = tuple(questions[:width])
        names = [q.id[12:] for q in template]
        for k, q in enumerate(questions):
            i, j = divmod(k, width)
            t = template[j]
            if not (
                type(q) is Noul
                and type(t) is Noul
                and q.id == f"candidate_{i}_{names[j]}"
                and q.kind == t.kind
                and q.instruction == t.instruction
                and q.true_if == t.true_if
                and q.false_if == t.false_if
            ):
                return None
        return cls(lambda i: questions[i * width : (i + 1) * width], len(questions) // width)


class CandidateAnswers(MutableMapping[str, "Answer"]):
    """A candidate round's answers as a (candidates x template) array.

    To the memory it is the mapping question id -> `NoulAnswer` that
    `SystemOne.decide` returns, built on demand; the memory itself reads
    ``values`` directly. Assigning a `NoulAnswer` to a question id writes its
    cell, so a controller that adjusts some answers after another produced
    them works on either form.
    """

    __slots__ = ("_column", "array", "questions")

    def __init__(self, questions: CandidateQuestions, values: npt.ArrayLike | None = None) -> None:
        self.questions = questions
        shape = (questions.n_candidates, len(questions.template))
        if values is None:
            self.array: npt.NDArray[np.float64] = np.zeros(shape)
        else:
            self.array = np.array(values, dtype=np.float64).reshape(shape)
        self._column = {name: j for j, name in enumerate(questions.names)}

    def column(self, kind: str) -> npt.NDArray[np.float64]:
        """The answers to one template question (by kind), one per candidate (a view)."""
        return self.array[:, self.questions.kinds.index(kind)]

    def _cell(self, question_id: str) -> tuple[int, int]:
        if question_id.startswith("candidate_"):
            head, _, name = question_id[10:].partition("_")
            j = self._column.get(name)
            if j is not None and head.isdigit() and int(head) < self.questions.n_candidates:
                return int(head), j
        raise KeyError(question_id)

    def __getitem__(self, question_id: str) -> Answer:
        i, j = self._cell(question_id)
        return NoulAnswer(float(self.array[i, j]))

    def __setitem__(self, question_id: str, answer: Answer) -> None:
        i, j = self._cell(question_id)
        if not isinstance(answer, NoulAnswer):
            raise TypeError(
                f"{question_id}: a Noul needs a NoulAnswer, got {type(answer).__name__}"
            )
        self.array[i, j] = answer.value

    def __delitem__(self, question_id: str) -> None:
        raise TypeError("a candidate round's answers cannot be removed")

    def __iter__(self) -> Iterator[str]:
        return (q.id for q in self.questions)

    def __len__(self) -> int:
        return len(self.questions)

    def __repr__(self) -> str:
        return f"CandidateAnswers({self.questions.n_candidates} candidates x {list(self.questions.names)})"


#: The Noul names of a relation pair's questions (ids ``pair_{i}_<name>``),
#: the columns of `PairAnswers.array`.
PAIR_NOULS = (
    "semantic",
    "causal_candidate_to_new",
    "causal_new_to_candidate",
    "same_episode",
    "supersedes",
    "entity_alias",
)
_ALIAS = PAIR_NOULS.index("entity_alias")


class PairQuestions(tuple[Noul | Choice, ...]):
    """The questions of a relation round over ``n_pairs`` (new observation,
    candidate) pairs, pair by pair, with ids ``pair_{i}_<name>``: every pair
    is asked the `PAIR_NOULS` but ``entity_alias`` where ``alias[i]``, and
    the ``temporal`` Choice where ``temporal[i]``.

    It is a plain tuple of questions to anyone who iterates it. A controller
    that knows the form answers the round as arrays (`PairAnswers`).
    """

    alias: list[bool]
    temporal: list[bool]
    n_pairs: int

    def __new__(
        cls, per_pair: Any, alias: Sequence[bool], temporal: Sequence[bool]
    ) -> PairQuestions:
        # per_pair(i, ask_alias=..., ask_temporal=...) -> pair i's questions
        if len(alias) != len(temporal):
            raise ValueError(f"{len(alias)} alias flags and {len(temporal)} temporal flags")
        self = super().__new__(
            cls,
            chain.from_iterable(
                per_pair(i, ask_alias=a, ask_temporal=t)
                for i, (a, t) in enumerate(zip(alias, temporal, strict=True))
            ),
        )
        self.alias = [bool(a) for a in alias]
        self.temporal = [bool(t) for t in temporal]
        self.n_pairs = len(self.alias)
        return self

    def asked(self) -> npt.NDArray[np.bool_]:
        """Which `PAIR_NOULS` each pair is asked, an (n_pairs, 6) array."""
        out = np.ones((self.n_pairs, len(PAIR_NOULS)), dtype=bool)
        out[:, _ALIAS] = self.alias
        return out


class PairAnswers(MutableMapping[str, "Answer"]):
    """A relation round's answers as arrays: ``array[i, j]`` answers pair
    i's `PAIR_NOULS` [j] (0 where it was not asked), ``temporal[i]`` its
    Choice (None where not asked).

    To the memory it is the mapping question id -> answer that
    `SystemOne.decide` returns, built on demand.
    """

    __slots__ = ("_asked", "array", "questions", "temporal")

    def __init__(
        self,
        questions: PairQuestions,
        values: npt.ArrayLike,
        temporal: Sequence[ChoiceAnswer | None],
    ) -> None:
        self.questions = questions
        self.array: npt.NDArray[np.float64] = np.array(values, dtype=np.float64).reshape(
            questions.n_pairs, len(PAIR_NOULS)
        )
        self.temporal: list[ChoiceAnswer | None] = list(temporal)
        if len(self.temporal) != questions.n_pairs:
            raise ValueError(f"{len(self.temporal)} temporal answers for {questions.n_pairs} pairs")
        self._asked = questions.asked()

    def _cell(self, question_id: str) -> tuple[int, int]:
        """(pair, column); column -1 is the temporal Choice."""
        if question_id.startswith("pair_"):
            head, _, name = question_id[5:].partition("_")
            if head.isdigit() and int(head) < self.questions.n_pairs:
                i = int(head)
                if name == "temporal" and self.questions.temporal[i]:
                    return i, -1
                if name in PAIR_NOULS and self._asked[i, j := PAIR_NOULS.index(name)]:
                    return i, j
        raise KeyError(question_id)

    def __getitem__(self, question_id: str) -> Answer:
        i, j = self._cell(question_id)
        if j < 0:
            choice = self.temporal[i]
            if choice is None:
                raise KeyError(question_id)
            return choice
        return NoulAnswer(float(self.array[i, j]))

    def __setitem__(self, question_id: str, answer: Answer) -> None:
        i, j = self._cell(question_id)
        if j < 0:
            if not isinstance(answer, ChoiceAnswer):
                raise TypeError(f"{question_id}: a Choice needs a ChoiceAnswer")
            self.temporal[i] = answer
        elif isinstance(answer, NoulAnswer):
            self.array[i, j] = answer.value
        else:
            raise TypeError(f"{question_id}: a Noul needs a NoulAnswer")

    def __delitem__(self, question_id: str) -> None:
        raise TypeError("a relation round's answers cannot be removed")

    def __iter__(self) -> Iterator[str]:
        return (q.id for q in self.questions)

    def __len__(self) -> int:
        return len(self.questions)

    def __repr__(self) -> str:
        return f"PairAnswers({self.questions.n_pairs} pairs)"


def pair_values(
    answers: Mapping[str, Answer], n_pairs: int
) -> tuple[npt.NDArray[np.float64], list[ChoiceAnswer | None]]:
    """A relation round's answers as `PairAnswers` holds them, from any
    mapping: a missing or non-Noul answer to a Noul reads as 0, a temporal
    answer that is not a ChoiceAnswer as None."""
    if type(answers) is PairAnswers:
        return answers.array, answers.temporal
    get = answers.get
    values = np.zeros((n_pairs, len(PAIR_NOULS)))
    temporal: list[ChoiceAnswer | None] = []
    for i in range(n_pairs):
        prefix = f"pair_{i}_"
        for j, name in enumerate(PAIR_NOULS):
            a = get(prefix + name)
            if isinstance(a, NoulAnswer):
                values[i, j] = a.value
        choice = get(prefix + "temporal")
        temporal.append(choice if isinstance(choice, ChoiceAnswer) else None)
    return values, temporal


@runtime_checkable
class SystemOne(Protocol):
    """Answers a batch of decision requests in one call.

    ``decide`` returns, per request and in order, a mapping from question id
    to answer. Questions are independent: no answer may depend on another's.
    """

    name: str

    def decide(self, requests: Sequence[DecisionRequest]) -> Sequence[Mapping[str, Answer]]: ...


def _all_in_unit(values: npt.NDArray[np.float64]) -> bool:
    """Every value in [0, 1] (none NaN): two reductions, NaN carried through
    both, and the bounds as initial values (an empty array passes)."""
    return bool(
        np.minimum.reduce(values, axis=None, initial=0.0) >= 0.0
        and np.maximum.reduce(values, axis=None, initial=1.0) <= 1.0
    )


def _in_unit(value: object) -> bool:
    """A number in [0, 1], not NaN. Anything the check cannot read as a
    number (a string, None, a huge int, an array of several values) is out,
    never an exception of its own: a controller's answers are not trusted."""
    try:
        return bool(math.isfinite(value) and 0.0 <= value <= 1.0)  # type: ignore[arg-type,operator]
    except (TypeError, ValueError, OverflowError):
        return False


def _shown(value: object) -> str:
    """A refused value as an error message shows it (a float as Python writes it)."""
    if isinstance(value, float | np.floating):
        return repr(float(value))
    return f"{value!r:.80}"


def _first_outside(
    values: npt.NDArray[Any], asked: npt.NDArray[np.bool_] | None
) -> tuple[int, int]:
    """The first cell (row-major, among ``asked``) that is not a number in
    [0, 1]; read value by value, so an array of any dtype is named."""
    for k, v in enumerate(values.ravel().tolist()):
        i, j = divmod(k, values.shape[1])
        if (asked is None or asked[i, j]) and not _in_unit(v):
            return i, j
    raise AssertionError("no cell outside [0, 1]")  # only called when one is


def validate_answers(
    requests: Sequence[DecisionRequest], answers: Sequence[Mapping[str, Answer]]
) -> list[Mapping[str, Answer]]:
    """Reject anything but one finite, in-range answer per question, and
    return the answers as the memory uses them.

    Controllers are not trusted: a wrong-shaped, NaN or out-of-range answer
    raises :class:`ControllerError` before any of it is used, and so does
    one of the wrong type (answers that are not a sequence of mappings, a
    value that is not a number, arrays reshaped after they were built).

    In what it returns every value is a Python float (a number a model gave
    as a numpy scalar, a Decimal or a 0-d array is converted: the memory
    keeps answers in records it writes as JSON), array answers are float64
    ndarrays, and a relation round's unasked cells are 0. A mapping that
    needed converting is returned as a new dict; array answers are
    converted in their own object.
    """
    try:
        n_answers = len(answers)
    except TypeError:
        # a generator could only be read once, and the memory reads the answers again
        raise ControllerError(
            f"decide must return a sequence of answer mappings, got {type(answers).__name__}"
        ) from None
    if n_answers != len(requests):
        raise ControllerError(f"expected answers for {len(requests)} requests, got {n_answers}")
    out: list[Mapping[str, Answer]] = []
    for r, (req, got) in enumerate(zip(requests, answers, strict=True)):
        if type(got) is CandidateAnswers and (
            got.questions is req.questions or got.questions == req.questions
        ):
            # the whole round at once: every cell is a Noul's value
            shape = (got.questions.n_candidates, len(got.questions.template))
            values = _real_array(r, req, got.array, shape)
            if not _all_in_unit(values):
                i, j = _first_outside(values, None)
                qid = f"candidate_{i}_{got.questions.names[j]}"
                raise ControllerError(f"{qid}: value {_shown(values[i, j])} is not in [0, 1]")
            got.array = values.astype(np.float64, copy=False)
            out.append(got)
            continue
        if type(got) is PairAnswers and got.questions is req.questions:
            n_pairs = got.questions.n_pairs
            values = _real_array(r, req, got.array, (n_pairs, len(PAIR_NOULS)))
            if not isinstance(got.temporal, Sequence) or len(got.temporal) != n_pairs:
                raise ControllerError(
                    f"request {r} ({req.purpose}): temporal answers for {n_pairs} pairs"
                )
            asked = got._asked
            if not _all_in_unit(values[asked]):
                i, j = _first_outside(values, asked)
                qid = f"pair_{i}_{PAIR_NOULS[j]}"
                raise ControllerError(f"{qid}: value {_shown(values[i, j])} is not in [0, 1]")
            values = values.astype(np.float64, copy=False)
            if values[~asked].any():
                # a cell nobody asked (a model that fills the whole column)
                # must not become an edge: it reads as not asked, 0
                values = np.where(asked, values, 0.0)
            got.array = values
            if any(got.questions.temporal):
                choices = [q for q in req.questions if type(q) is Choice]
                fixed = _validate_choices(choices, got)
                if fixed:
                    got.temporal = list(got.temporal)
                    for qid, choice in fixed.items():
                        got[qid] = choice
            out.append(got)
            continue
        try:
            out.append(_validate_mapping(r, req, got))
        except (TypeError, AttributeError, KeyError, IndexError, ValueError) as exc:
            # not a mapping of question id to answer (a list, None, a
            # mapping that fails its own reads)
            raise ControllerError(
                f"request {r} ({req.purpose}): the answers must be a mapping from question id "
                f"to answer, got {type(got).__name__} ({type(exc).__name__}: {exc})"
            ) from None
    return out


def _real_array(
    r: int, req: DecisionRequest, values: object, shape: tuple[int, int]
) -> npt.NDArray[Any]:
    """A round's answer array as a plain ndarray of real numbers, else a
    ControllerError: a mask would hide values from the check, and complex
    or object cells do not compare with the bounds."""
    if not isinstance(values, np.ndarray) or isinstance(values, np.ma.MaskedArray):
        raise ControllerError(
            f"request {r} ({req.purpose}): answers must be a numpy array, "
            f"got {type(values).__name__}"
        )
    plain = np.asarray(values)  # np.matrix and other subclasses as the ndarray they hold
    if plain.shape != shape:
        raise ControllerError(f"request {r} ({req.purpose}): answers of shape {plain.shape}")
    if plain.dtype.kind not in "fiub":
        raise ControllerError(
            f"request {r} ({req.purpose}): answers of dtype {plain.dtype}, not real numbers"
        )
    return plain


def _validate_mapping(
    r: int, req: DecisionRequest, got: Mapping[str, Answer]
) -> Mapping[str, Answer]:
    """`validate_answers` for a request answered as a plain mapping: ``got``,
    or a dict of its answers with every value a Python float."""
    ids = {q.id for q in req.questions}
    keys = set(got)
    if keys != ids:
        missing, extra = sorted(ids - keys), sorted(keys - ids, key=repr)
        raise ControllerError(
            f"request {r} ({req.purpose}): missing answers {missing[:5]}, unexpected {extra[:5]}"
        )
    fixed: dict[str, Answer] = {}
    for q in req.questions:
        if isinstance(q, Noul):
            a = got[q.id]
            if not isinstance(a, NoulAnswer):
                raise ControllerError(f"{q.id}: a Noul needs a NoulAnswer, got {type(a).__name__}")
            if not _in_unit(a.value):
                raise ControllerError(f"{q.id}: value {_shown(a.value)} is not in [0, 1]")
            if type(a.value) is not float:
                fixed[q.id] = NoulAnswer(float(a.value))
    fixed.update(_validate_choices([q for q in req.questions if not isinstance(q, Noul)], got))
    if not fixed:
        return got
    return {qid: fixed[qid] if qid in fixed else got[qid] for qid in got}


def _validate_choices(
    choices: Sequence[Question], got: Mapping[str, Answer]
) -> dict[str, ChoiceAnswer]:
    """The Choice half of `validate_answers`; returns, by question id, the
    answers that needed converting (a label or probability that is not a
    plain str or float), converted."""
    fixed: dict[str, ChoiceAnswer] = {}
    for q in choices:
        assert isinstance(q, Choice)
        a = got.get(q.id)
        if not isinstance(a, ChoiceAnswer):
            raise ControllerError(f"{q.id}: a Choice needs a ChoiceAnswer, got {type(a).__name__}")
        if a.label not in q.options:
            raise ControllerError(f"{q.id}: label {a.label!r} is not one of {q.options}")
        try:
            covered = set(a.distribution) == set(q.options)
            keys = list(a.distribution) if covered else []
            probs = [a.distribution[k] for k in keys]
        except (TypeError, AttributeError, KeyError):  # not a mapping
            covered = False
        if not covered:
            raise ControllerError(f"{q.id}: the distribution must cover exactly {q.options}")
        if not all(_in_unit(p) for p in probs):
            raise ControllerError(f"{q.id}: probabilities must be in [0, 1]")
        floats = [float(p) for p in probs]  # a Decimal and a float do not add
        if abs(sum(floats) - 1.0) > 1e-3:
            raise ControllerError(f"{q.id}: probabilities sum to {sum(floats):.4f}, not 1")
        if type(a.label) is not str or not all(
            type(k) is str and type(p) is float for k, p in zip(keys, probs, strict=True)
        ):
            # the question's own option strings, in the distribution's order
            option = q.options.index
            fixed[q.id] = ChoiceAnswer(
                q.options[option(a.label)],
                {q.options[option(k)]: p for k, p in zip(keys, floats, strict=True)},
            )
    return fixed
