"""``jevmem answer "..." --memory M``: an answer from a memory's evidence (System Two).

The model is any OpenAI-compatible endpoint: ``--base-url`` / ``--model``,
else JEVMEM_S2_BASE_URL / JEVMEM_S2_MODEL (then OPENAI_*); the key is read
from JEVMEM_S2_API_KEY (then OPENAI_API_KEY), or from the variable
``--api-key-env`` names, never from the command line.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

__all__ = ["add_answer_command"]


def add_answer_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser(
        "answer",
        parents=[common],
        help="answer a question from a memory with an OpenAI-compatible model",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("query")
    p.add_argument("-k", type=int, default=10, help="evidence items given to the model")
    p.add_argument("--now", default=None, help="query time (ISO 8601)")
    p.add_argument(
        "--scope", action="append", metavar="KEY=VALUE", help="answer from this scope only"
    )
    p.add_argument("--base-url", default=None, help="the endpoint, e.g. http://localhost:8000/v1")
    p.add_argument("--model", default=None)
    p.add_argument("--api-key-env", default=None, help="read the API key from this variable")
    p.add_argument("--timeout-s", type=float, default=60.0, help="per attempt")
    p.add_argument("--max-retries", type=int, default=4)
    p.add_argument("--stream", action="store_true", help="read the reply as server-sent events")
    p.add_argument("--no-abstain", action="store_true", help="always ask the model")
    p.add_argument("--abstain-below", type=float, default=None, help="sufficiency cut (0.2)")
    p.add_argument("--json", action="store_true", help="print the answer as one JSON object")
    p.set_defaults(func=cmd_answer)


def cmd_answer(args: argparse.Namespace) -> int:
    from jevmem._cli_support import is_memory, open_memory, scope_flags, terminal_safe
    from jevmem.answering import DEFAULT_ABSTAIN_BELOW
    from jevmem.system_two import ChatCompletionsClient

    if not is_memory(args.memory):  # a read: never make a memory of another directory
        raise SystemExit(f"no memory at {args.memory}; run `jevmem ingest` first")
    key = None
    if args.api_key_env:
        key = os.environ.get(args.api_key_env)
        if not key:
            raise SystemExit(f"{args.api_key_env} is not set")
    # the model first: a missing one is reported before the memory is read
    client = ChatCompletionsClient(
        args.base_url,
        args.model,
        key,
        timeout_s=args.timeout_s,
        max_retries=args.max_retries,
        stream=args.stream,
    )
    m = open_memory(args.memory, args.embedder)
    try:
        a = m.answer(
            args.query,
            args.k,
            system_two=client,
            abstain=not args.no_abstain,
            abstain_below=DEFAULT_ABSTAIN_BELOW
            if args.abstain_below is None
            else args.abstain_below,
            now=args.now,
            scope=scope_flags(args.scope),
        )
    finally:
        m.close()
    t = a.trace
    if args.json:
        out: dict[str, Any] = {
            "query": a.query,
            "answer": a.text,
            "abstained": a.abstained,
            "cited": [
                {"id": e.id, "text": e.text, "timestamp": e.timestamp, "provenance": e.provenance}
                for e in a.cited_evidence
            ],
            "sufficiency": a.search.sufficiency,
            "trace": t,
        }
        print(json.dumps(out, indent=2, default=str))
        return 0
    print(terminal_safe(a.text))
    for e in a.cited_evidence:
        when = (
            "" if e.timestamp is None else time.strftime("%Y-%m-%d %H:%M", time.gmtime(e.timestamp))
        )
        who = e.provenance.get("speaker", "")
        print(
            f"  [{e.id}] {when} {terminal_safe(f'{who}: ' if who else '')}{terminal_safe(e.text)}"
        )
    suff = "n/a" if a.search.sufficiency is None else f"{a.search.sufficiency:.2f}"
    if not t["model_called"]:
        why = (
            "no evidence"
            if t["abstained_by"] == "no_evidence"
            else f"sufficiency {suff} < {t['abstain_below']}"
        )
        print(f"abstained ({why}): the model was not called")
    else:
        print(
            f"{terminal_safe(str(t['completion']['model']))}: {_tokens(t['prompt_tokens'])} prompt + "
            f"{_tokens(t['completion_tokens'])} completion tokens, {t['generate_s']:.2f} s; "
            f"{len(a.search.evidence)} evidence items, sufficiency {suff}"
        )
    return 0


def _tokens(n: int | None) -> str:
    """A token count, or "?" where the server reported none."""
    return "?" if n is None else str(n)
