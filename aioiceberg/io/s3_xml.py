"""A faster body parse for S3's ListObjectsV2 pages, inside botocore's own response pipeline.

botocore turns each rest-xml body into a dict by walking its shape model node by node, ~15 us
a listed key on this machine: three times a whole raw listing's cost. This parser compiles the output
shape once into converters (tag -> member, type) and reads the page's ElementTree (C) in one
pass, with the same result: signing, transport, error bodies (status >= 300), headers, and
the after-call hooks (the ``EncodingType=url`` key decoding) stay botocore's. A shape with a
construct the compiler does not know (XML attributes, maps, wrapped lists, blobs) keeps
botocore's parse.

botocore also parses every S3 body once more before that, only to see whether a 200 carries
an ``<Error>`` (or a cut-off body) to turn into a 500; for a listing page that check is made
here on the one parse, with the same outcome, and its tree handed on to the body parse.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any

# aiobotocore, botocore: optional (the s3 extra); this module is imported only with them
from aiobotocore.parsers import PROTOCOL_PARSERS, AioResponseParserFactory, AioRestXMLParser
from botocore import handlers as botocore_handlers
from botocore.parsers import ResponseParserError

FAST_SHAPES = frozenset({"ListObjectsV2Output"})
"""Output shapes parsed here; every other operation keeps botocore's parse."""

_FAST_OPERATIONS = frozenset({"ListObjectsV2"})
_PARSED_ROOT = "aioiceberg.parsed_root"  # in a response's own context: (body, its root element)

Convert = Callable[[ET.Element], Any]


class _Unsupported(Exception):
    """The shape holds a construct this compiler leaves to botocore."""


def _local(tag: str) -> str:
    return tag.rpartition("}")[2] if tag[:1] == "{" else tag


def _text(node: ET.Element) -> str:
    return node.text or ""


def _compile(shape: Any, timestamp: Callable[[str], Any]) -> Convert:
    kind = shape.type_name
    if kind == "string":
        return _text
    if kind in {"integer", "long"}:
        return lambda node: int(_text(node))
    if kind == "boolean":
        return lambda node: _text(node) == "true"
    if kind == "timestamp":
        return _memo_timestamps(timestamp)
    if kind == "structure":
        return _compile_structure(shape, timestamp)
    raise _Unsupported(f"{shape.name}: {kind}")


def _memo_timestamps(timestamp: Callable[[str], Any]) -> Convert:
    """A listing's objects often share their LastModified text (written in the same second):
    each distinct text is parsed once (datetimes are immutable; the memo is bounded)."""
    memo: dict[str, Any] = {}

    def convert(node: ET.Element) -> Any:
        text = node.text or ""
        try:
            return memo[text]
        except KeyError:
            if len(memo) >= 4096:
                memo.clear()
            parsed = memo[text] = timestamp(text)
            return parsed

    return convert


def _compile_structure(shape: Any, timestamp: Callable[[str], Any]) -> Convert:
    """tag -> (member name, converter, is a flattened list). A scalar repeated (never in a
    well-formed page) keeps its first value."""
    members: dict[str, tuple[str, Convert, bool]] = {}
    for name, member in shape.members.items():
        serialization = member.serialization
        if serialization.get("location") is not None or serialization.get("eventheader"):
            continue
        if serialization.get("xmlAttribute") or serialization.get("xmlNamespace"):
            raise _Unsupported(f"{shape.name}.{name}: XML attribute")
        if member.type_name == "list":
            if not serialization.get("flattened"):
                raise _Unsupported(f"{shape.name}.{name}: wrapped list")
            if member.member.serialization.get("xmlAttribute"):
                raise _Unsupported(f"{shape.name}.{name}: XML attribute")
            tag = member.member.serialization.get("name") or serialization.get("name") or name
            members[tag] = (name, _compile(member.member, timestamp), True)
        else:
            members[serialization.get("name") or name] = (name, _compile(member, timestamp), False)

    by_tag: dict[str, tuple[str, Convert, bool] | None] = {}  # namespaced tag -> member, or None

    def structure(node: ET.Element) -> dict[str, Any]:
        parsed: dict[str, Any] = {}
        for child in node:
            tag = child.tag
            try:
                found = by_tag[tag]
            except KeyError:
                found = by_tag[tag] = members.get(_local(tag))
            if found is None:
                continue
            name, convert, is_list = found
            if is_list:
                items = parsed.get(name)
                if items is None:
                    items = parsed[name] = []
                items.append(convert(child))
            elif name in parsed:
                continue
            elif convert is _text:
                parsed[name] = child.text or ""
            else:
                parsed[name] = convert(child)
        return parsed

    return structure


def parse_xml_body(body: bytes) -> ET.Element:
    """The page's root element, with botocore's XML settings (UTF-8 unless declared)."""
    parser = ET.XMLParser(target=ET.TreeBuilder(), encoding="utf-8")
    parser.feed(body)
    root: ET.Element = parser.close()
    return root


class _FastRestXMLParser(AioRestXMLParser):  # type: ignore[misc]
    def __init__(self, compiled: dict[str, Convert | None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._compiled = compiled

    def _parse_payload(self, response: Any, shape: Any, member_shapes: Any, final_parsed: Any) -> None:
        name = getattr(shape, "name", None)
        body = response.get("body")
        if name not in FAST_SHAPES or shape.serialization.get("payload") or not body:
            super()._parse_payload(response, shape, member_shapes, final_parsed)
            return
        if name not in self._compiled:
            try:
                self._compiled[name] = _compile_structure(shape, self._timestamp_parser)
            except _Unsupported:
                self._compiled[name] = None
        convert = self._compiled[name]
        if convert is None:
            super()._parse_payload(response, shape, member_shapes, final_parsed)
            return
        stashed = response.get("context", {}).pop(_PARSED_ROOT, None)
        if stashed is not None and stashed[0] is body:
            root = stashed[1]
        else:
            try:
                root = parse_xml_body(body)
            except ET.ParseError:  # botocore's parse raises its own error for a broken body
                super()._parse_payload(response, shape, member_shapes, final_parsed)
                return
        try:
            final_parsed.update(convert(root))
        except ValueError as e:  # a value of the wrong form (<Size>lots</Size>): as botocore's parse fails
            raise ResponseParserError(f"unreadable {name} page: {e}") from e


class FastListingParserFactory(AioResponseParserFactory):  # type: ignore[misc]
    """aiobotocore's parser factory, with ListObjectsV2 bodies parsed by compiled shapes
    (compiled once per factory, i.e. per session)."""

    def __init__(self) -> None:
        super().__init__()
        self._compiled: dict[str, Convert | None] = {}

    def create_parser(self, protocol_name: str) -> Any:
        if protocol_name == "rest-xml":
            return _FastRestXMLParser(self._compiled, **self._defaults)
        return PROTOCOL_PARSERS[protocol_name](**self._defaults)


def _error_in_200(operation_model: Any, response_dict: Any, **kwargs: Any) -> None:
    """botocore's 200-with-an-error check (a 200 whose body is ``<Error>`` or no whole XML
    document is a 500, so retried), parsing a listing page once for both the check and the
    body parse."""
    original = botocore_handlers._handle_200_error
    if (
        operation_model.name not in _FAST_OPERATIONS
        or not response_dict
        or response_dict.get("status_code") != 200
        or not response_dict.get("body")
        or not botocore_handlers._should_handle_200_error(operation_model, response_dict)
    ):
        original(operation_model=operation_model, response_dict=response_dict, **kwargs)
        return
    body = response_dict["body"]
    try:
        root = parse_xml_body(body)
    except ET.ParseError:
        response_dict["status_code"] = 500
        return
    if root.tag == "Error":
        response_dict["status_code"] = 500
        return
    context = response_dict.get("context")
    if isinstance(context, dict):
        context[_PARSED_ROOT] = (body, root)


def install_fast_listing(session: Any) -> None:
    """Give ``session`` (an AioSession, before it makes clients) the listing parse; the
    200-error check is swapped only where botocore has the handler this module replaces."""
    session.register_component("response_parser_factory", FastListingParserFactory())
    original = getattr(botocore_handlers, "_handle_200_error", None)
    if original is None or not hasattr(botocore_handlers, "_should_handle_200_error"):
        return
    events = session.get_component("event_emitter")
    events.unregister("before-parse.s3.*", original)
    events.register_first("before-parse.s3.*", _error_in_200)
