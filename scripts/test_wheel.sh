#!/usr/bin/env bash
# Build the abi3 release wheel and install it into a fresh virtualenv with no
# Rust toolchain on PATH and no source tree on sys.path: what a user gets
# from `pip install jevmem-*.whl`. Then use it: a memory, a durable
# directory, a search.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
MATURIN=${MATURIN:-.venv/bin/maturin}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# built for the interpreter `maturin develop` used (the one beside maturin):
# the same PyO3 configuration, so cargo reuses that build instead of
# compiling the bindings again (the wheel is abi3 either way)
interpreter="$(dirname "$MATURIN")/python"
[ -x "$interpreter" ] || interpreter="$PYTHON"
PIP_QUIET=1 "$MATURIN" build --release --quiet --interpreter "$interpreter" --out "$work/dist"
wheel=$(ls "$work"/dist/jevmem-*-abi3-*.whl)
echo "== wheel: $(basename "$wheel")"
"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "$wheel"
cd "$work"  # away from the checkout: only the installed wheel can be imported
env -i PATH=/usr/bin:/bin HOME="$work" "$work/venv/bin/python" - <<'PY'
import pathlib, tempfile
import jevmem
assert "site-packages" in jevmem.__file__, jevmem.__file__
m = jevmem.Memory(embedder=jevmem.HashEmbedder(64))
m.add("The deploy moved to Thursday", speaker="ops")
m.add("Lunch is at noon", speaker="amy")
hit = m.search("when is the deploy?", k=1)
assert hit.evidence and "deploy" in hit.evidence[0].text, hit
d = pathlib.Path(tempfile.mkdtemp()) / "mem"
with jevmem.Memory.open(d, embedder=jevmem.HashEmbedder(64)) as dm:
    dm.add("A durable note")
again = jevmem.Memory.open(d)
assert len(again.store) == 1
again.close()
print("wheel OK:", jevmem.__file__)
PY
