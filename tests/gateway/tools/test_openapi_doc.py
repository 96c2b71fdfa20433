"""Reading an OpenAPI document's operations as tools: local ``$ref``s inlined (a schema that refers to itself
cut where it loops), path-level parameters, the first server relative to the document, and a document that
is not OpenAPI 3 named for what it is."""

from __future__ import annotations

import json

import pytest

from gateway.tools.openapi_doc import OpenApiError, operation_ids, parse, read_tools

DOC = {
    "openapi": "3.1.0",
    "servers": [{"url": "/api/{version}", "variables": {"version": {"default": "v2"}}}],
    "paths": {
        "/categories/{category_id}": {
            "parameters": [{"$ref": "#/components/parameters/CategoryId"}],
            "get": {"operationId": "getCategory", "description": "A category and its children.",
                    "parameters": [{"name": "depth", "in": "query", "schema": {"type": "integer"}},
                                   {"name": "session", "in": "cookie", "schema": {"type": "string"}}]},
            "put": {"operationId": "putCategory",
                    "parameters": [{"name": "body", "in": "query", "schema": {"type": "string"}}],
                    "requestBody": {"required": True, "content": {"application/json": {
                        "schema": {"$ref": "#/components/schemas/Category"}}}}},
        },
    },
    "components": {
        "parameters": {"CategoryId": {"name": "category_id", "in": "path", "required": True,
                                      "schema": {"type": "string"}}},
        "schemas": {"Category": {"type": "object", "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/components/schemas/Category"}},
            "a~b/c": {"$ref": "#/components/schemas/Odd~0name~1x"}}},
            "Odd~name/x": {"type": "boolean"}},
    },
}


def test_operations_become_tools_with_refs_inlined():
    (get, put), missing = read_tools(DOC, "https://shop.example/docs/openapi.json", "shop",
                                     ["getCategory", "putCategory", "nope"])
    assert missing == ["nope"]
    assert get.name == "shop.getCategory" and get.description == "A category and its children."
    assert get.input_schema == {"type": "object", "required": ["category_id"], "properties": {
        "category_id": {"type": "string"}, "depth": {"type": "integer"}}}  # no cookie parameter
    assert get.endpoint.url == "https://shop.example/api/v2/categories/{category_id}"
    assert get.endpoint.parameters == {"category_id": "path", "depth": "query"}
    # a parameter is called "body", so the JSON body is "request_body"
    assert put.endpoint.body == "request_body" and put.description == "PUT /categories/{category_id}"
    category = put.input_schema["properties"]["request_body"]
    assert category["properties"]["children"] == {"type": "array", "items": {}}  # the loop, cut
    assert category["properties"]["a~b/c"] == {"type": "boolean"}  # RFC 6901 escapes
    assert "$ref" not in json.dumps(put.input_schema)
    assert sorted(put.input_schema["required"]) == ["category_id", "request_body"]
    assert operation_ids(DOC) == ["getCategory", "putCategory"]


@pytest.mark.parametrize(("doc", "message"), [
    ({"swagger": "2.0", "paths": {}}, "not an OpenAPI 3 document (swagger 2.0)"),
    ({"order": "4411"}, "not an OpenAPI 3 document (no 'openapi')"),
    ([1, 2], "the document is a JSON list, not an OpenAPI object"),
    ({"openapi": "3.0.0", "paths": {"/x": {"get": {"operationId": "x", "parameters": [{"$ref": "#/nowhere"}]}}}},
     "the reference '#/nowhere' names nothing in the document"),
])
def test_a_document_that_is_not_openapi_3_is_named(doc, message):
    with pytest.raises(OpenApiError) as caught:
        read_tools(doc, "http://127.0.0.1/openapi.json", "shop", ["x"])
    assert message in caught.value.message


def test_yaml_is_read_with_json_keys_and_values_and_without_aliases():
    doc = parse(b"openapi: 3.0.3\npaths:\n  /x:\n    get:\n      operationId: x\n      responses:\n"
                b"        200: {description: ok}\n      x-since: 2024-05-01\n")
    assert doc["paths"]["/x"]["get"]["responses"] == {"200": {"description": "ok"}}  # keys as in JSON
    assert doc["paths"]["/x"]["get"]["x-since"] == "2024-05-01"  # a date as a string
    assert parse(b'{"openapi": "3.1.0"}') == {"openapi": "3.1.0"}
    bomb = b"a: &a [x, x, x]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b]\n"
    for body in (bomb, b"<html><body>Not here</body></html>", b"paths: [unclosed"):
        with pytest.raises(OpenApiError) as caught:
            parse(body)
        assert caught.value.message.startswith("neither JSON nor YAML")
