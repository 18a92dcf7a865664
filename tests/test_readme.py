"""Every Python block of README.md runs as written, each on its own (a fresh
namespace, in an empty directory), and the README links nowhere outside
the repository."""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def _python_blocks() -> list[tuple[int, str]]:
    """(first line number, code) of each ```python block."""
    blocks = []
    lines = README.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            start, body = i + 2, []
            i += 1
            while lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            blocks.append((start, "\n".join(body) + "\n"))
        i += 1
    return blocks


BLOCKS = _python_blocks()


def test_the_readme_has_python_blocks() -> None:
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize(("line", "code"), BLOCKS, ids=[f"line{n}" for n, _ in BLOCKS])
def test_readme_block_runs(
    line: int, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # blocks save files (agent.jvm, agent-memory/)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), warnings.catch_warnings():
        # without the onnx extra the default embedder falls back, with a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        exec(compile(code, f"README.md:{line}", "exec"), {"__name__": "__readme__"})
    if "print(" in code:
        assert out.getvalue().strip(), "a block that prints printed nothing"


def test_readme_links_stay_inside_the_repository() -> None:
    text = README.read_text(encoding="utf-8")
    root = README.parent
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        path = (root / target).resolve()
        assert path.is_relative_to(root) and path.exists(), target
    # placeholders a reader cannot run (the blocks' own runs catch undefined names)
    assert "mypkg" not in text and "vec_a" not in text
