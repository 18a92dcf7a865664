"""The Python side of the memory plane, under `jevmem.Memory`.

Internal: no stability promise between releases. The layers build on each
other, lowest first, and import nothing from above:

- `config`, `results`, `text`, `signals`, `filters`: settings, result
  types and pure functions over texts, nodes and signals;
- `state.MemoryState`: what a Memory keeps beside its store and the
  per-node reads the query path asks for;
- `lifecycle.LifecycleMemory`: forget, versions of facts, save/load/open
  and the durable write path;
- `writing.WritingMemory`: the write path (SPEC §2);
- `scoped`, `query_features`, `query`: one query's read path (SPEC §3);
- `jevmem.memory.Memory` (not here) adds search and answers on top.

Tests and benchmarks read these modules by the names they define.
"""
