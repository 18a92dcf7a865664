"""What the two model-based tests share (`tests/test_stateful_memory.py`,
`tests/test_stateful_remote.py`): the memory they build and the times and
modes they draw from."""

from __future__ import annotations

from hypothesis import strategies as st

from jevmem import MemoryConfig

DIM = 64
#: the last second of the year 9999: the latest timestamp a memory takes
MAX_TS = 253_339_228_799
T0 = 1_600_000_000
#: consolidation every 5 writes (not 20), so short runs reach it
CONFIG = MemoryConfig(consolidation_period=5)
MODES = ("lexical", "anchors", "traversal", "full")
SESSIONS = ("s1", "s2")

ts_ints = st.integers(min_value=T0, max_value=T0 + 400 * 86_400)


def search_scopes_of(users: tuple[str, ...]) -> st.SearchStrategy[dict[str, str] | None]:
    """The scopes a search is drawn with: none, the empty one, a user, a
    session, or both."""
    return st.one_of(
        st.none(),
        st.just({}),
        st.builds(lambda u: {"user": u}, st.sampled_from(users)),
        st.builds(lambda s: {"session": s}, st.sampled_from(SESSIONS)),
        st.builds(
            lambda u, s: {"user": u, "session": s},
            st.sampled_from(users),
            st.sampled_from(SESSIONS),
        ),
    )
