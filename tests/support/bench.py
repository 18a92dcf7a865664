"""Run a ``bench/`` script in a child process, as ``python bench/<script>.py ...`` runs it.

The tests of the benchmark harnesses go through their command lines: the
scripts are not importable modules of the package, and the tests do not put
``bench/`` on their own import path.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
TIMEOUT_S = 300.0


def run_bench(script: str, *args: str, before: str = "") -> subprocess.CompletedProcess[str]:
    """``python bench/<script> <args>``, its output captured as text.

    ``before`` is Python run first in the child (to simulate a condition, e.g.
    ``"import jevmem; del jevmem.Memory"``); the script then runs as
    ``__main__`` from the bench folder, which the child has first on its path
    as ``python bench/<script>`` has.
    """
    path = BENCH / script
    if not path.is_file():
        raise FileNotFoundError(path)
    if not before:
        cmd = [sys.executable, str(path), *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    code = f"{before}\nimport runpy\nrunpy.run_path({script!r}, run_name='__main__')\n"
    # `python -c` starts its path with the working directory: here, the bench folder
    cmd = [sys.executable, "-c", code, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=BENCH)
