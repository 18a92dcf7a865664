"""See what a memory holds: its nodes and edges by view, and what a query did.

``graph_data(memory, query=...)`` collects the nodes, the edges of the four
views between them and, for a query, its evidence, the edges the traversal
took to reach it, the rounds and the stop reason. It exports as

* ``to_json``: the same dict as JSON (``from_json`` reads it back);
* ``to_graphml``: GraphML for Gephi, yEd, networkx (``networkx.read_graphml``);
* ``to_html``: one self-contained page that works offline. Its script and
  style are ours, shipped in ``jevmem/_assets/`` and inlined into the page:
  an SVG force layout with filters by view, scope, speaker and text, and the
  query's path, rounds and stop reason.

``jevmem inspect MEMORY [--query Q] -o graph.html`` on the command line.
A large memory is cut to ``max_nodes`` (the query's evidence and path first,
then their neighbours, then the newest), and the output says so.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any

from jevmem.errors import InvalidInputError, InvalidTypeError

if TYPE_CHECKING:
    from jevmem.memory import Memory

__all__ = [
    "DEFAULT_MAX_NODES",
    "GRAPH_FORMAT",
    "from_json",
    "graph_data",
    "to_graphml",
    "to_html",
    "to_json",
]

#: What ``graph_data`` draws at most unless told otherwise: an SVG force
#: layout stays responsive up to a few hundred nodes.
DEFAULT_MAX_NODES = 500
#: The ``format`` field of the dict (and of the JSON export).
GRAPH_FORMAT = "jevmem-graph/1"
VIEWS = ("semantic", "temporal", "causal", "entity")
_TYPE_NAMES = ("episodic", "semantic", "procedural", "preference")


def _node(memory: Memory, node_id: int) -> dict[str, Any]:
    n = memory.store.get(node_id)
    types = dict(zip(_TYPE_NAMES, (round(float(t), 4) for t in n.types), strict=True))
    return {
        "id": n.id,
        "text": n.text,
        "timestamp": n.timestamp,
        "speaker": n.provenance.get("speaker"),
        "provenance": dict(n.provenance),
        "entities": list(n.entities),
        "scope": dict(n.scope),
        "metadata": dict(n.metadata),
        "type": max(types, key=lambda k: types[k]),
        "types": types,
    }


def _pick(memory: Memory, ids: list[int], first: list[int], max_nodes: int) -> list[int]:
    """At most ``max_nodes`` of ``ids``: ``first`` (the query's nodes), then
    their neighbours, then the newest."""
    if len(ids) <= max_nodes:
        return ids
    held = set(ids)
    chosen: dict[int, None] = {}
    for i in first:
        if i in held and len(chosen) < max_nodes:
            chosen[i] = None
    for i in first:
        for e in memory.store.neighbors(i):
            for j in (e.src, e.dst):
                if j in held and len(chosen) < max_nodes:
                    chosen[j] = None
    for i in reversed(ids):
        if len(chosen) >= max_nodes:
            break
        chosen[i] = None
    return sorted(chosen)


def _query_part(memory: Memory, query: str, k: int, scope: Any, now: Any) -> dict[str, Any]:
    r = memory.search(query, k, scope=scope, now=now)
    trace = r.trace
    evidence: list[dict[str, Any]] = [
        {
            "rank": rank,
            "id": e.id,
            "score": round(float(e.score), 4),
            "via": None
            if e.via is None
            else {
                "view": e.via.view,
                "src": e.via.src,
                "dst": e.via.dst,
                "from": e.via.from_node,
                "weight": round(float(e.via.weight), 4),
            },
        }
        for rank, e in enumerate(r.evidence, 1)
    ]
    return {
        "text": query,
        "k": k,
        "evidence": evidence,
        # the path: each evidence item's edge, back to the anchors it grew from
        "path": [
            {"src": x["via"]["src"], "dst": x["via"]["dst"], "view": x["via"]["view"]}
            for x in evidence
            if x["via"] is not None
        ],
        "anchors": [x["id"] for x in evidence if x["via"] is None],
        "rounds": trace.get("rounds", []),
        "stop_reason": trace.get("stop_reason"),
        "sufficiency": r.sufficiency,
        "missing": r.missing,
        "contradiction": r.contradiction,
        "sufficient": r.sufficient,
        "thresholds": trace.get("thresholds", {}),
        "trace": json.loads(json.dumps(trace, default=str)),
    }


def graph_data(
    memory: Memory,
    *,
    query: str | None = None,
    k: int = 10,
    scope: Mapping[str, str] | None = None,
    now: Any = None,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> dict[str, Any]:
    """The nodes (at most ``max_nodes``; those ``scope`` sees), the edges of
    every view between them, and for ``query`` what its search returned and
    how (see the module docstring). A plain dict of JSON values."""
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or max_nodes < 1:
        raise InvalidInputError(f"max_nodes must be a positive int, got {max_nodes!r}")
    ids = memory.matching_ids(scope)
    q = None if query is None else _query_part(memory, query, k, scope, now)
    first: list[int] = []
    if q is not None:
        first = [x["id"] for x in q["evidence"]] + [p["src"] for p in q["path"]]
    drawn = _pick(memory, ids, first, max_nodes)
    drawn_set = set(drawn)
    edges: dict[tuple[int, int, str], dict[str, Any]] = {}
    edges_total: set[tuple[int, int, str]] = set()
    for i in ids if len(ids) <= max_nodes else drawn:
        for e in memory.store.neighbors(i):
            key = (e.src, e.dst, e.view)
            edges_total.add(key)
            if e.src in drawn_set and e.dst in drawn_set and key not in edges:
                edges[key] = {
                    "src": e.src,
                    "dst": e.dst,
                    "view": e.view,
                    "weight": round(float(e.weight), 4),
                    "origin": e.origin,
                    "label": e.temporal_label,
                }
    truncated = None
    if len(drawn) < len(ids):
        truncated = {
            "nodes_total": len(ids),
            "nodes_drawn": len(drawn),
            "max_nodes": max_nodes,
            "note": f"showing {len(drawn)} of {len(ids)} nodes (the query's first, then their "
            "neighbours, then the newest); raise --max-nodes to draw more",
        }
    return {
        "format": GRAPH_FORMAT,
        "scope": dict(scope) if scope else None,
        "stats": {"nodes": len(ids), "edges_drawn": len(edges), "edges_seen": len(edges_total)},
        "nodes": [_node(memory, i) for i in drawn],
        "edges": sorted(edges.values(), key=lambda e: (e["src"], e["dst"], e["view"])),
        "truncated": truncated,
        "query": q,
    }


def to_json(data: Mapping[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True)


def from_json(text: str | bytes) -> dict[str, Any]:
    """A ``to_json`` export read back; raises `InvalidInputError` for anything
    else: not JSON, nested too deeply, not of this format, a required key
    missing or of the wrong type (named, e.g. ``nodes[3].text``), an edge
    between nodes it does not hold, or a string with a lone surrogate (it
    could not be written out as UTF-8 again)."""
    if not isinstance(text, (str, bytes, bytearray)):
        raise InvalidTypeError(f"from_json takes a str, got {type(text).__name__}")
    try:
        data = json.loads(text)
    except RecursionError:
        raise InvalidInputError("not a graph export: JSON nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8
        raise InvalidInputError(f"not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != GRAPH_FORMAT:
        raise InvalidInputError(f"not a {GRAPH_FORMAT} export")
    _check_strings(data)
    _check_graph(data)
    return data


def _check_strings(data: Any) -> None:
    """Every string (keys too) encodes as UTF-8: no lone surrogate, which a
    JSON ``\\ud800`` escape can carry. Iterative: any depth ``json`` read."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, dict):
            for k, v in value.items():
                stack.append((k, f"a key of {where or 'the export'}"))
                stack.append((v, f"{where}.{k}" if where else k))
        elif isinstance(value, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(value))
        elif isinstance(value, str) and not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise InvalidInputError(
                    f"graph export: {ascii(where)[1:-1]} has a lone surrogate at "
                    f"index {exc.start}: not valid Unicode text"
                ) from None


_INT: tuple[type, ...] = (int,)
_NUMBER: tuple[type, ...] = (int, float)
_OPT_STR: tuple[type, ...] = (str, type(None))
_OPT_NUMBER: tuple[type, ...] = (int, float, type(None))
_OPT_DICT: tuple[type, ...] = (dict, type(None))
#: The keys (and their JSON types) of what `graph_data` returns.
_TOP_KEYS = {
    "format": (str,),
    "scope": _OPT_DICT,
    "stats": (dict,),
    "nodes": (list,),
    "edges": (list,),
    "truncated": _OPT_DICT,
    "query": _OPT_DICT,
}
_NODE_FIELDS = {
    "id": _INT,
    "text": (str,),
    "timestamp": (int, type(None)),
    "speaker": _OPT_STR,
    "provenance": (dict,),
    "entities": (list,),
    "scope": (dict,),
    "metadata": (dict,),
    "type": (str,),
    "types": (dict,),
}
_EDGE_FIELDS = {
    "src": _INT,
    "dst": _INT,
    "view": (str,),
    "weight": _NUMBER,
    "origin": _OPT_STR,
    "label": _OPT_STR,
}
_QUERY_FIELDS = {
    "text": (str,),
    "k": _INT,
    "evidence": (list,),
    "path": (list,),
    "anchors": (list,),
    "rounds": (list,),
    "stop_reason": _OPT_STR,
    "sufficiency": _OPT_NUMBER,
    "missing": _OPT_NUMBER,
    "contradiction": _OPT_NUMBER,
    "sufficient": (bool,),
    "thresholds": (dict,),
    "trace": (dict,),
}
_EVIDENCE_FIELDS = {"rank": _INT, "id": _INT, "score": _NUMBER, "via": _OPT_DICT}
_VIA_FIELDS = {"view": (str,), "src": _INT, "dst": _INT, "from": _INT, "weight": _NUMBER}
_PATH_FIELDS = {"src": _INT, "dst": _INT, "view": (str,)}
_TYPE_WORDS = {
    int: "an int",
    float: "a number",
    str: "a str",
    dict: "an object",
    list: "a list",
    bool: "a bool",
    type(None): "null",
}


def _fields(value: Any, fields: Mapping[str, tuple[type, ...]], where: str) -> dict[str, Any]:
    """``value`` is an object holding each of ``fields`` with one of its types
    (a bool is not a number here)."""
    if not isinstance(value, dict):
        raise InvalidInputError(f"graph export: {where} must be an object, got {_json_type(value)}")
    for key, types in fields.items():
        if key not in value:
            raise InvalidInputError(f"graph export: {where}.{key} is missing".replace(": .", ": "))
        v = value[key]
        if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
            want = " or ".join(dict.fromkeys(_TYPE_WORDS[t] for t in types))
            raise InvalidInputError(
                f"graph export: {where}.{key} must be {want}, got {_json_type(v)}".replace(
                    ": .", ": "
                )
            )
    return value


def _json_type(v: Any) -> str:
    return "a bool" if isinstance(v, bool) else _TYPE_WORDS.get(type(v), type(v).__name__)


def _check_graph(data: dict[str, Any]) -> None:
    """The structure `to_graphml` and `to_html` read, as `graph_data` writes it."""
    _fields(data, _TOP_KEYS, "")
    ids: set[int] = set()
    for i, node in enumerate(data["nodes"]):
        _fields(node, _NODE_FIELDS, f"nodes[{i}]")
        if node["id"] in ids:
            raise InvalidInputError(f"graph export: nodes[{i}].id {node['id']} is repeated")
        ids.add(node["id"])
        if not all(isinstance(x, str) for x in node["entities"]):
            raise InvalidInputError(f"graph export: nodes[{i}].entities must be a list of str")
    for i, edge in enumerate(data["edges"]):
        _fields(edge, _EDGE_FIELDS, f"edges[{i}]")
        for end in ("src", "dst"):
            if edge[end] not in ids:
                raise InvalidInputError(
                    f"graph export: edges[{i}].{end} {edge[end]} is not one of the nodes"
                )
    q = data["query"]
    if q is None:
        return
    _fields(q, _QUERY_FIELDS, "query")
    for i, x in enumerate(q["evidence"]):
        _fields(x, _EVIDENCE_FIELDS, f"query.evidence[{i}]")
        if x["via"] is not None:
            _fields(x["via"], _VIA_FIELDS, f"query.evidence[{i}].via")
    for i, p in enumerate(q["path"]):
        _fields(p, _PATH_FIELDS, f"query.path[{i}]")
    if not all(isinstance(a, int) and not isinstance(a, bool) for a in q["anchors"]):
        raise InvalidInputError("graph export: query.anchors must be a list of node ids (int)")
    for i, r in enumerate(q["rounds"]):
        if not isinstance(r, dict):
            raise InvalidInputError(f"graph export: query.rounds[{i}] must be an object")


_GRAPHML_NS = "http://graphml.graphdrawing.org/xmlns"
_NODE_KEYS = (("text", "string"), ("timestamp", "long"), ("speaker", "string"))
_NODE_JSON_KEYS = ("scope", "metadata", "entities", "types")
_EDGE_KEYS = (("view", "string"), ("weight", "double"), ("origin", "string"), ("label", "string"))


#: What XML 1.0 cannot carry, even escaped: the C0 controls but tab, LF and
#: CR, the surrogates (a lone one can come in through `from_json`), U+FFFE
#: and U+FFFF.
_XML_FORBIDDEN = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_safe(s: str) -> str:
    return _XML_FORBIDDEN.sub("", s)


def to_graphml(data: Mapping[str, Any]) -> str:
    """GraphML: one directed graph, node attributes text, timestamp, speaker,
    type and (as JSON strings) scope, metadata, entities, types; edge
    attributes view, weight, origin, label and, for a query, ``on_path``."""
    ET.register_namespace("", _GRAPHML_NS)
    root = ET.Element(f"{{{_GRAPHML_NS}}}graphml")
    keys = [("node", n, t) for n, t in (*_NODE_KEYS, ("type", "string"))]
    keys += [("node", n, "string") for n in _NODE_JSON_KEYS]
    keys += [("node", "evidence_rank", "int")]
    keys += [("edge", n, t) for n, t in _EDGE_KEYS] + [("edge", "on_path", "boolean")]
    for scope, name, typ in keys:
        ET.SubElement(
            root,
            f"{{{_GRAPHML_NS}}}key",
            {"id": f"{scope[0]}_{name}", "for": scope, "attr.name": name, "attr.type": typ},
        )
    graph = ET.SubElement(root, f"{{{_GRAPHML_NS}}}graph", {"edgedefault": "directed"})
    q = data.get("query")
    ranks = {x["id"]: x["rank"] for x in q["evidence"]} if q else {}
    path = {(p["src"], p["dst"], p["view"]) for p in q["path"]} if q else set()

    def put(parent: ET.Element, key: str, value: Any) -> None:
        if value is None:
            return
        el = ET.SubElement(parent, f"{{{_GRAPHML_NS}}}data", {"key": key})
        el.text = _xml_safe(value if isinstance(value, str) else json.dumps(value))

    for n in data["nodes"]:
        el = ET.SubElement(graph, f"{{{_GRAPHML_NS}}}node", {"id": f"n{n['id']}"})
        for name, _ in (*_NODE_KEYS, ("type", "")):
            put(el, f"n_{name}", n.get(name))
        for name in _NODE_JSON_KEYS:
            put(el, f"n_{name}", json.dumps(n.get(name), ensure_ascii=False, sort_keys=True))
        if n["id"] in ranks:
            put(el, "n_evidence_rank", ranks[n["id"]])
    for i, e in enumerate(data["edges"]):
        el = ET.SubElement(
            graph,
            f"{{{_GRAPHML_NS}}}edge",
            {"id": f"e{i}", "source": f"n{e['src']}", "target": f"n{e['dst']}"},
        )
        for name, _ in _EDGE_KEYS:
            put(el, f"e_{name}", e.get(name))
        if q:
            put(el, "e_on_path", (e["src"], e["dst"], e["view"]) in path)
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    # a raw carriage return reads back as a line feed (XML normalises line
    # ends); ElementTree writes it raw, so it goes as a character reference
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body.replace("\r", "&#13;")


def _asset(name: str) -> str:
    return resources.files("jevmem").joinpath("_assets").joinpath(name).read_text(encoding="utf-8")


def to_html(data: Mapping[str, Any], *, title: str = "jevmem memory") -> str:
    """One page, no network: the data, our script and our style inlined."""
    # no "<" at all inside the data's script element ("</script>" or "<!--"
    # in a memory's text would end or derail it); JSON reads \u003c back as "<"
    payload = json.dumps(data, ensure_ascii=False, sort_keys=True).replace("<", "\\u003c")
    values = {
        "<!--TITLE-->": _html_escape(title),
        "/*STYLE*/": _asset("inspect.css"),
        "/*SCRIPT*/": _asset("inspect.js"),
        "/*DATA*/": payload,
    }
    # one pass over the template: nothing is searched for inside what was put in
    parts = re.split("(" + "|".join(re.escape(m) for m in values) + ")", _asset("inspect.html"))
    if {p for p in parts if p in values} != set(values):
        raise RuntimeError("jevmem/_assets/inspect.html lost one of its markers")
    return "".join(values.get(p, p) for p in parts)


def _html_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
