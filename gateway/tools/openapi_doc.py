"""An OpenAPI 3 document read as tools: each chosen operation becomes ``<source>.<operationId>``.

A tool's arguments are the operation's path, query and header parameters (path-level ones included),
and its JSON request body as the argument ``body``. Local ``$ref``s (``#/components/...``) are
inlined, so the model gets one self-contained JSON schema; a reference that loops back on itself is
cut to ``{}`` at its second visit, and one to another document is ``{}`` too (only this document is
read). The document is JSON or YAML (``parse``). Anything that is not an OpenAPI 3 document is an
``OpenApiError`` saying what it is instead.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urljoin

import yaml

from gateway.core.errors import GatewayError
from gateway.tools.model import Endpoint, ToolInfo

__all__ = ["METHODS", "OpenApiError", "operation_ids", "parse", "read_tools"]

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
_LOCATIONS = ("path", "query", "header")  # cookies are not sent: a tool has no cookie jar
_MAX_DEPTH = 24  # nesting of inlined schemas; deeper is cut to {}
_MAX_NODES = 20_000  # per inlined part: references that fan out (a diamond of schemas) stop growing here


class OpenApiError(GatewayError):
    """The document is not an OpenAPI 3 document (or a part of it is malformed): the sentence says how."""


class _Loader(yaml.SafeLoader):
    """YAML's safe loader without aliases: ``*name`` repeats a node, so a few lines could stand for a
    document too large to read; an OpenAPI document repeats with ``$ref`` instead."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not read", event.start_mark)
        return super().compose_node(parent, index)


def parse(body: bytes) -> Any:
    """A document's text as data: JSON, else YAML (its dates and other non-JSON values as strings, its keys
    as strings, as in JSON). Neither: ``OpenApiError``."""
    try:
        return json.loads(body)
    except ValueError:
        pass
    try:
        doc = yaml.load(body, Loader=_Loader)  # noqa: S506 - a safe loader (SafeLoader, without aliases)
    except yaml.YAMLError as exc:
        raise OpenApiError(f"neither JSON nor YAML ({type(exc).__name__})") from None
    if not isinstance(doc, dict | list):  # an HTML page or plain text reads as one YAML string
        raise OpenApiError("neither JSON nor YAML (one plain scalar)")
    return json.loads(json.dumps(doc, default=str))


def _pointer(doc: dict, ref: str) -> Any:
    """The part of ``doc`` a local reference (``#/components/schemas/Order``) names (RFC 6901)."""
    node: Any = doc
    for token in ref[2:].split("/") if ref != "#" else []:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise OpenApiError(f"the reference {ref!r} names nothing in the document")
    return node


def _inline(doc: dict, node: Any) -> Any:
    return _Inliner(doc).inline(node, (), 0)


class _Inliner:
    def __init__(self, doc: dict) -> None:
        self.doc = doc
        self.left = _MAX_NODES

    def inline(self, node: Any, seen: tuple[str, ...], depth: int) -> Any:
        self.left -= 1
        if depth > _MAX_DEPTH or self.left < 0:
            return {}
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                if not ref.startswith("#") or ref in seen:
                    return {}  # another document, or a loop: the model gets "anything" there
                return self.inline(_pointer(self.doc, ref), (*seen, ref), depth + 1)
            return {k: self.inline(v, seen, depth + 1) for k, v in node.items()}
        if isinstance(node, list):
            return [self.inline(v, seen, depth + 1) for v in node]
        return node


def _checked(doc: Any) -> dict:
    if not isinstance(doc, dict):
        raise OpenApiError(f"the document is a JSON {type(doc).__name__}, not an OpenAPI object")
    version = doc.get("openapi")
    if not isinstance(version, str) or not version.startswith("3."):
        found = (f"swagger {doc['swagger']}" if "swagger" in doc
                 else f"openapi {version!r}" if version else "no 'openapi'")
        raise OpenApiError(f"not an OpenAPI 3 document ({found}); only OpenAPI 3.x is read")
    if not isinstance(doc.get("paths", {}), dict):
        raise OpenApiError("the document's 'paths' is not an object")
    return doc


def _operations(doc: dict) -> dict[str, tuple[str, str, dict, list]]:
    """operationId → (method, path, operation, the path item's parameters)."""
    found: dict[str, tuple[str, str, dict, list]] = {}
    for path, item in doc.get("paths", {}).items():
        item = _inline(doc, item) if isinstance(item, dict) and "$ref" in item else item
        if not isinstance(item, dict):
            continue
        shared = item.get("parameters", [])
        for method in METHODS:
            operation = item.get(method)
            if isinstance(operation, dict) and isinstance(operation.get("operationId"), str):
                found.setdefault(operation["operationId"], (method, path, operation, shared))
    return found


def operation_ids(doc: Any) -> list[str]:
    """Every operationId the document has, in its order."""
    return list(_operations(_checked(doc)))


def _base_url(doc: dict, doc_url: str) -> str:
    """Where the operations' paths are: the first server (relative to the document), else its origin."""
    servers = doc.get("servers")
    first = servers[0] if isinstance(servers, list) and servers else None
    if isinstance(first, dict) and isinstance(first.get("url"), str):
        server = first["url"]
        for name, variable in (first.get("variables") or {}).items():
            if isinstance(variable, dict) and "default" in variable:
                server = server.replace("{" + name + "}", str(variable["default"]))
        return urljoin(doc_url, server).rstrip("/")
    return urljoin(doc_url, "/").rstrip("/")


def _tool(doc: dict, source: str, base: str, op_id: str, method: str, path: str, operation: dict,
          shared: list) -> ToolInfo:
    params: dict[tuple[str, str], dict] = {}
    for raw in [*shared, *operation.get("parameters", [])]:  # the operation's own override the path's
        param = _inline(doc, raw)
        if isinstance(param, dict) and param.get("in") in _LOCATIONS and isinstance(param.get("name"), str):
            params[(param["in"], param["name"])] = param
    properties: dict[str, dict] = {}
    required: list[str] = []
    locations: dict[str, str] = {}
    for (where, name), param in params.items():
        schema = dict(param.get("schema") or {"type": "string"})
        if param.get("description"):
            schema.setdefault("description", param["description"])
        properties[name] = schema
        locations[name] = where
        if param.get("required") or where == "path":
            required.append(name)
    body_arg = None
    body = _inline(doc, operation.get("requestBody")) if operation.get("requestBody") else None
    json_body = (body or {}).get("content", {}).get("application/json") if isinstance(body, dict) else None
    if isinstance(json_body, dict):
        body_arg = "body" if "body" not in properties else "request_body"
        schema = dict(json_body.get("schema") or {"type": "object"})
        if body.get("description"):
            schema.setdefault("description", body["description"])
        properties[body_arg] = schema
        if body.get("required"):
            required.append(body_arg)
    input_schema: dict = {"type": "object", "properties": properties}
    if required:
        input_schema["required"] = required
    description = " ".join(p for p in (operation.get("summary"), operation.get("description")) if isinstance(p, str))
    return ToolInfo(name=f"{source}.{op_id}", description=description.strip() or f"{method.upper()} {path}",
                    input_schema=input_schema,
                    endpoint=Endpoint(method=method.upper(), url=base + path, parameters=locations, body=body_arg))


def read_tools(doc: Any, doc_url: str, source: str, wanted: list[str]) -> tuple[list[ToolInfo], list[str]]:
    """The tools for the ``wanted`` operationIds, and which of them the document does not have."""
    doc = _checked(doc)
    operations = _operations(doc)
    base = _base_url(doc, doc_url)
    tools, missing = [], []
    for op_id in wanted:
        if op_id not in operations:
            missing.append(op_id)
            continue
        try:
            tools.append(_tool(doc, source, base, op_id, *operations[op_id]))
        except (AttributeError, TypeError) as exc:  # a part of the operation is not the shape OpenAPI says
            raise OpenApiError(f"operation {op_id!r} is malformed: {exc}") from None
    return tools, missing
