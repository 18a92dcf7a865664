"""The integrations' frameworks are optional extras: importing jevmem (its
package, CLI and the integrations package itself) never imports them."""

from __future__ import annotations

import subprocess
import sys

OPTIONAL = ("mcp", "mcp_types", "langchain_core", "langchain_tests", "llama_index", "pydantic")


def test_import_jevmem_imports_no_framework() -> None:
    code = (
        "import sys\n"
        "import jevmem, jevmem.cli, jevmem.integrations, jevmem.integrations.mcp_cli\n"
        "jevmem.cli.main.__name__\n"
        f"loaded = sorted(m for m in sys.modules if m.split('.')[0] in {OPTIONAL!r})\n"
        "print(','.join(loaded))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "", f"import jevmem loaded {out.stdout.strip()}"


def test_the_check_sees_a_framework_when_one_is_imported() -> None:
    # the same probe, once an integration is imported: the assertion above can fail
    code = (
        "import sys\n"
        "import jevmem.integrations.langchain\n"
        "print('langchain_core' in sys.modules and 'pydantic' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "True"
