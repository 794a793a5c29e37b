#!/usr/bin/env python3
"""MCP conformance client: drives an MCP server with the official Python SDK.

    python3 tools/mcp_client/check.py --stdio -- <command> [args...]
    python3 tools/mcp_client/check.py --http http://127.0.0.1:PORT/mcp
    options: --mode discover|legacy (default discover), --timeout SECONDS (default 60), --verbose

--mode maps onto the SDK's own switch, `mcp.Client(..., mode=...)` (mcp 2.3.0):
  discover -> mode="auto" (the SDK default): sends `server/discover` (2026-07-28) and, only if the
              server does not answer it with a usable DiscoverResult, silently falls back to the
              `initialize` handshake.  The protocol-version check below turns such a fallback into
              a failure, and then a second, bare `server/discover` probe is sent to show why.
  legacy   -> mode="legacy": `initialize` (offering 2025-11-25) + `notifications/initialized`.
(The SDK's third choice, mode="2026-07-28", adopts that version without any `server/discover`
round trip, so it would not test the server's discover answer; it is not used.)

Checks (one `ok: ...` line each; failures are `FAIL: ...` lines and exit code 1):
  protocol  the negotiated version (from the session's discover/initialize result) is 2026-07-28
            in discover mode, 2025-06-18 or 2025-11-25 in legacy mode
  1  tools/list has `calculate_sum`, inputSchema {type: object, properties a, b: integer,
     required: [a, b] (any order)}
  2  tools/call calculate_sum {a: 2, b: 40} -> not isError, text content "42"
  3  tools/call calculate_sum {a: 2} -> isError, text mentions `b` and "required"
  4  tools/call no_such_tool -> JSON-RPC error (the SDK raises MCPError); an isError result fails
     (schema: "errors in finding the tool ... should be reported as an MCP error response")
  5  `about` is listed with an outputSchema and readOnlyHint; calling it gives structuredContent
     (which the SDK validates against that schema) naming calculate_sum, with a JSON text copy
  6  approval: `delete_note` needs a person's yes. The client's elicitation callback is the person:
     it answers no with a reason (isError carrying the reason; the note stays), then yes (the note
     is deleted). Before 2026-07-28 the question comes as `elicitation/create` (stdio); over
     2026-07-28 as an `input_required` result (seen raw once), and a retry with a forged
     requestState is refused.  Over stateless HTTP before 2026-07-28 no question can reach the
     client, so the call is refused and the callback never runs.  A second client with no
     elicitation callback is refused with a reason ("cannot be asked"), and the note stays.
The whole run is bounded by --timeout.  Exit codes: 0 all passed, 1 a check failed (or
connection error / timeout), 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from typing import Any

try:
    import anyio
    from mcp import Client, ClientSession, StdioServerParameters
    from mcp import types
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError
    from pydantic import ValidationError
except ImportError as exc:  # pragma: no cover - environment problem
    print(f"mcp_client: missing dependency ({exc}); run "
          "`pip install -r tools/mcp_client/requirements.txt`", file=sys.stderr)
    sys.exit(2)

MODERN_VERSION = "2026-07-28"
LEGACY_VERSIONS = ("2025-06-18", "2025-11-25")
SDK_MODE = {"discover": "auto", "legacy": "legacy"}
TOOL = "calculate_sum"
# A tool with an outputSchema (an object result) and readOnlyHint.
STRUCTURED_TOOL = "about"
# Tools that keep notes; deleting one needs a person's approval.
SAVE_TOOL = "save_note"
APPROVAL_TOOL = "delete_note"
EXPECTED_DESCRIPTIONS = {"a": "The first integer.", "b": "The second integer."}
INVALID_PARAMS = -32602
MAX_PAGES = 100


def say(line: str) -> None:
    print(line, flush=True)


class Checks:
    def __init__(self) -> None:
        self.failures: list[str] = []
        self.step = "starting"

    def ok(self, what: str) -> None:
        say(f"ok: {what}")

    def fail(self, what: str) -> None:
        self.failures.append(what)
        say(f"FAIL: {what}")

    def note(self, what: str) -> None:
        say(f"note: {what}")


def texts(result: Any) -> list[str]:
    return [block.text for block in result.content if getattr(block, "type", None) == "text"]


def dump(value: Any) -> str:
    if hasattr(value, "model_dump"):
        value = value.model_dump(by_alias=True, mode="json", exclude_none=True)
    return json.dumps(value, sort_keys=True)


def flatten(exc: BaseException) -> list[BaseException]:
    """The leaf exceptions of a (possibly nested) exception group; duck-typed for Python 3.10."""
    subs = getattr(exc, "exceptions", None)
    if isinstance(subs, tuple) and subs:
        return [leaf for sub in subs for leaf in flatten(sub)]
    return [exc]


def shape_errors(exc: ValidationError) -> str:
    """The pydantic errors as `field: message`, joined with '; '."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(result)'}: {e['msg']}" for e in exc.errors())


def describe(exc: BaseException) -> str:
    parts = []
    for leaf in flatten(exc):
        if isinstance(leaf, MCPError):
            parts.append(f"MCPError {leaf.code}: {leaf.message}")
        elif isinstance(leaf, ValidationError):
            parts.append(f"the SDK rejected the result shape ({leaf.title}: {shape_errors(leaf)})")
        else:
            parts.append(f"{type(leaf).__name__}: {leaf}")
    return "; ".join(parts)


# --------------------------------------------------------------------------- checks


def check_protocol(c: Checks, client: Client, mode: str) -> None:
    session = client.session
    version = client.protocol_version
    if session.discover_result is not None:
        how = f"server/discover (supportedVersions={session.discover_result.supported_versions})"
    elif session.initialize_result is not None:
        how = f"initialize (server answered protocolVersion={session.initialize_result.protocol_version})"
    else:  # pragma: no cover - Client only publishes a negotiated session
        how = "unknown negotiation"
    info = client.server_info
    say(f"protocol version: {version} via {how}")
    say(f"server info: {dump(info) if info is not None else '(none)'}")
    say(f"server capabilities: {dump(client.server_capabilities)}")
    if client.server_capabilities.tools is None:
        c.note("server does not declare the `tools` capability")
    if mode == "discover":
        if version == MODERN_VERSION and session.discover_result is not None:
            c.ok(f"negotiated protocol {version} via server/discover")
        else:
            c.fail(f"discover mode: expected protocol {MODERN_VERSION} via server/discover, but the SDK "
                   f"negotiated {version} via {how} (mode='auto' falls back to initialize when "
                   "server/discover is not answered with a usable DiscoverResult)")
    else:
        if version in LEGACY_VERSIONS and session.initialize_result is not None:
            c.ok(f"negotiated protocol {version} via initialize")
        else:
            c.fail(f"legacy mode: expected protocol {' or '.join(LEGACY_VERSIONS)} via initialize, "
                   f"got {version} via {how}")


async def check_list_tools(c: Checks, client: Client) -> None:
    c.step = "1: tools/list"
    tools = []
    cursor = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    else:
        c.note(f"tools/list still returned a nextCursor after {MAX_PAGES} pages; stopped paging")
    names = [t.name for t in tools]
    say(f"tools: {names}")
    tool = next((t for t in tools if t.name == TOOL), None)
    if tool is None:
        c.fail(f"1: tools/list does not contain {TOOL!r} (got {names})")
        return
    c.ok(f"1: tools/list contains {TOOL!r}")
    schema = tool.input_schema
    say(f"{TOOL} inputSchema: {json.dumps(schema, sort_keys=True)}")
    problems = []
    if schema.get("type") != "object":
        problems.append(f"type is {schema.get('type')!r}, expected 'object'")
    props = schema.get("properties")
    if not isinstance(props, dict):
        problems.append(f"properties is {props!r}, expected an object")
        props = {}
    for name in ("a", "b"):
        prop = props.get(name)
        if not isinstance(prop, dict):
            problems.append(f"property {name!r} missing")
            continue
        if prop.get("type") != "integer":
            problems.append(f"property {name!r} has type {prop.get('type')!r}, expected 'integer'")
        if prop.get("description") != EXPECTED_DESCRIPTIONS[name]:
            c.note(f"property {name!r} description is {prop.get('description')!r} "
                   f"(expected {EXPECTED_DESCRIPTIONS[name]!r})")
    extra = sorted(set(props) - {"a", "b"})
    if extra:
        c.note(f"inputSchema has extra properties {extra}")
    required = schema.get("required")
    if not isinstance(required, list) or len(required) != 2 or set(required) != {"a", "b"}:
        problems.append(f"required is {required!r}, expected ['a', 'b'] (any order)")
    if problems:
        c.fail(f"1: {TOOL} inputSchema: " + "; ".join(problems))
    else:
        c.ok(f"1: {TOOL} inputSchema is object{{a: integer, b: integer}}, required {required}")


async def check_sum(c: Checks, client: Client) -> None:
    c.step = "2: tools/call calculate_sum {a: 2, b: 40}"
    try:
        result = await client.call_tool(TOOL, {"a": 2, "b": 40})
    except MCPError as exc:
        c.fail(f"2: {TOOL} {{a: 2, b: 40}} raised JSON-RPC error {exc.code}: {exc.message}")
        return
    say(f"2: result (SDK model): {dump(result)}")
    text = "".join(texts(result))
    if result.is_error:
        c.fail(f"2: {TOOL} {{a: 2, b: 40}} returned isError=true (text {text!r})")
    elif text != "42":
        c.fail(f"2: {TOOL} {{a: 2, b: 40}} text content is {text!r}, expected '42'")
    else:
        c.ok(f"2: {TOOL} {{a: 2, b: 40}} -> '42', isError not set")
    if result.structured_content is not None:
        say(f"2: structuredContent: {json.dumps(result.structured_content, sort_keys=True)}")


async def check_missing_arg(c: Checks, client: Client) -> None:
    c.step = "3: tools/call calculate_sum {a: 2}"
    try:
        result = await client.call_tool(TOOL, {"a": 2})
    except MCPError as exc:
        c.fail(f"3: {TOOL} {{a: 2}} raised JSON-RPC error {exc.code}: {exc.message!r}; expected a "
               "CallToolResult with isError=true (argument validation errors are tool execution "
               "errors as of 2025-11-25)")
        return
    say(f"3: result (SDK model): {dump(result)}")
    text = "\n".join(texts(result))
    if not result.is_error:
        c.fail(f"3: {TOOL} {{a: 2}} did not set isError=true (text {text!r})")
        return
    mentions_b = re.search(r"(?<![A-Za-z0-9_])b(?![A-Za-z0-9_])", text) is not None
    mentions_required = "required" in text.lower()
    if mentions_b and mentions_required:
        c.ok(f"3: {TOOL} {{a: 2}} -> isError=true, {text!r}")
    else:
        missing = [w for w, hit in (("`b`", mentions_b), ("'required'", mentions_required)) if not hit]
        c.fail(f"3: {TOOL} {{a: 2}} isError text {text!r} does not mention {' and '.join(missing)}")


async def check_unknown_tool(c: Checks, client: Client) -> None:
    c.step = "4: tools/call no_such_tool"
    try:
        result = await client.call_tool("no_such_tool", {})
    except MCPError as exc:
        c.ok(f"4: no_such_tool -> JSON-RPC error {exc.code}: {exc.message!r}")
        if exc.code != INVALID_PARAMS:
            c.note(f"4: error code is {exc.code}; the spec's code for an unknown tool is "
                   f"{INVALID_PARAMS} (Invalid params)")
        return
    say(f"4: result (SDK model): {dump(result)}")
    if result.is_error:
        c.fail("4: no_such_tool returned a CallToolResult with isError=true; an unknown tool must be a "
               f"JSON-RPC error (e.g. {INVALID_PARAMS} 'Unknown tool: no_such_tool')")
    else:
        c.fail("4: no_such_tool succeeded; expected a JSON-RPC error")


async def check_structured(c: Checks, client: Client) -> None:
    """5: a tool that declares an outputSchema answers with structuredContent that fits it.

    The SDK itself validates structuredContent against the listed outputSchema (and raises when a
    tool with one answers without it); this check also requires that such a tool exists."""
    c.step = "5: tools/call about (outputSchema)"
    listed = await client.list_tools()
    tool = next((t for t in listed.tools if t.name == STRUCTURED_TOOL), None)
    if tool is None or not tool.output_schema:
        c.fail(f"5: {STRUCTURED_TOOL!r} is not listed with an outputSchema")
        return
    say(f"5: {STRUCTURED_TOOL} outputSchema: {json.dumps(tool.output_schema, sort_keys=True)}")
    annotations = tool.annotations
    if annotations is None or annotations.read_only_hint is not True:
        c.fail(f"5: {STRUCTURED_TOOL} lacks readOnlyHint=true (annotations {annotations!r})")
        return
    try:
        result = await client.call_tool(STRUCTURED_TOOL, {})
    except MCPError as exc:
        c.fail(f"5: {STRUCTURED_TOOL} raised JSON-RPC error {exc.code}: {exc.message!r}")
        return
    structured = result.structured_content
    if result.is_error or not isinstance(structured, dict):
        c.fail(f"5: {STRUCTURED_TOOL} gave isError={result.is_error}, structuredContent {structured!r}")
        return
    if TOOL not in structured.get("tools", []):
        c.fail(f"5: {STRUCTURED_TOOL} structuredContent.tools {structured.get('tools')!r} lacks {TOOL!r}")
        return
    text = "".join(texts(result))
    if json.loads(text) != structured:
        c.fail(f"5: the text copy {text!r} is not the structuredContent")
        return
    c.ok(f"5: {STRUCTURED_TOOL} -> structuredContent fitting its outputSchema, with a text copy")


class Person:
    """The user behind the client's elicitation callback: answers with what it is told to next,
    and keeps every question it was asked."""

    def __init__(self) -> None:
        self.next: types.ElicitResult | None = None
        self.asked: list[types.ElicitRequestParams] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        self.asked.append(params)
        if self.next is None:
            return types.ErrorData(code=-32600, message="the check did not expect a question")
        answer, self.next = self.next, None
        return answer


def yes() -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"approve": True})


def no(reason: str) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"approve": False, "reason": reason})


async def save_note(client: Client, text: str) -> int | None:
    result = await client.call_tool(SAVE_TOOL, {"text": text})
    found = re.search(r"note (\d+)", "".join(texts(result)))
    return int(found.group(1)) if found and not result.is_error else None


async def check_approval(c: Checks, client: Client, person: Person, mode: str, over_http: bool) -> None:
    c.step = "6: approval (delete_note)"
    listed = await client.list_tools()
    if not any(t.name == APPROVAL_TOOL for t in listed.tools):
        c.fail(f"6: {APPROVAL_TOOL!r} is not listed")
        return
    number = await save_note(client, f"approval check, mode {mode}")
    if number is None:
        c.fail(f"6: {SAVE_TOOL} did not say which note it saved")
        return
    arguments = {"number": number}
    modern = mode == "discover"
    if over_http and not modern:
        person.next = yes()
        result = await client.call_tool(APPROVAL_TOOL, arguments)
        text = "".join(texts(result))
        if person.asked or not result.is_error or "2026-07-28" not in text:
            c.fail(f"6: stateless HTTP before 2026-07-28 cannot ask, so {APPROVAL_TOOL} must be refused "
                   f"without a question; got isError={result.is_error} {text!r}, {len(person.asked)} question(s)")
        else:
            c.ok(f"6: {APPROVAL_TOOL} refused without a question over stateless HTTP on "
                 f"{client.protocol_version}: {text!r}")
        person.next = None
        return

    if modern:
        # The raw first answer: a question in an `input_required` result, not a request.
        raw = await client.session.call_tool(APPROVAL_TOOL, arguments, allow_input_required=True)
        if not isinstance(raw, types.InputRequiredResult):
            c.fail(f"6: on 2026-07-28, {APPROVAL_TOOL} answered {dump(raw)} instead of input_required")
            return
        question = (raw.input_requests or {}).get("approval")
        if question is None or getattr(question, "method", None) != "elicitation/create":
            c.fail(f"6: the input_required result holds no elicitation question: {dump(raw)}")
            return
        c.ok(f"6: {APPROVAL_TOOL} on 2026-07-28 -> input_required with an elicitation question")
        # A forged state with a yes: refused, and the note stays.
        forged = await client.session.call_tool(
            APPROVAL_TOOL, arguments, request_state=(raw.request_state or "") + "x",
            input_responses={"approval": yes()})
        text = "".join(texts(forged))
        if not forged.is_error or "not approved" not in text:
            c.fail(f"6: a forged requestState with a yes was not refused: {dump(forged)}")
            return
        c.ok(f"6: a forged requestState with a yes is refused: {text!r}")
        # The real state, for other arguments: refused as well.
        moved = await client.session.call_tool(
            APPROVAL_TOOL, {"number": number + 1000}, request_state=raw.request_state,
            input_responses={"approval": yes()})
        if not moved.is_error:
            c.fail(f"6: an answer moved to other arguments was accepted: {dump(moved)}")
            return
        c.ok("6: an answer moved to other arguments is refused")

    person.next = no("keep that note")
    denied = await client.call_tool(APPROVAL_TOOL, arguments)
    text = "".join(texts(denied))
    if len(person.asked) != 1:
        c.fail(f"6: the person was asked {len(person.asked)} time(s) for one call")
        return
    asked = person.asked[-1]
    message = getattr(asked, "message", "")
    if APPROVAL_TOOL not in message or str(number) not in message:
        c.fail(f"6: the question does not name the call: {message!r}")
        return
    schema = getattr(asked, "requested_schema", None)
    if schema is None or schema.get("properties", {}).get("approve", {}).get("type") != "boolean":
        c.fail(f"6: the question's form has no boolean `approve`: {schema!r}")
        return
    if not denied.is_error or "keep that note" not in text:
        c.fail(f"6: a no with a reason gave isError={denied.is_error} {text!r}")
        return
    c.ok(f"6: asked {message!r}; no -> isError {text!r}")

    person.next = yes()
    approved = await client.call_tool(APPROVAL_TOOL, arguments)
    text = "".join(texts(approved))
    if len(person.asked) != 2 or approved.is_error or f"Deleted note {number}" not in text:
        c.fail(f"6: a yes gave isError={approved.is_error} {text!r} after {len(person.asked)} question(s)")
        return
    c.ok(f"6: yes -> {text!r}")


async def check_not_askable(c: Checks, target: StdioServerParameters | str, mode: str) -> None:
    """6: a client with no elicitation callback (so no elicitation capability) is refused."""
    c.step = "6: approval without an elicitation callback"
    async with Client(target, mode=SDK_MODE[mode], cache=None) as client:
        number = await save_note(client, f"unaskable check, mode {mode}")
        if number is None:
            c.fail(f"6: {SAVE_TOOL} did not say which note it saved")
            return
        result = await client.call_tool(APPROVAL_TOOL, {"number": number})
        text = "".join(texts(result))
        if not result.is_error or "was not run" not in text:
            c.fail(f"6: a client that cannot be asked gave isError={result.is_error} {text!r}")
            return
        listed = await client.call_tool(APPROVAL_TOOL, {"number": number})
        if "was not run" not in "".join(texts(listed)):
            c.fail("6: a second call from a client that cannot be asked was not refused the same way")
            return
        c.ok(f"6: a client that cannot be asked is refused: {text!r}")


# --------------------------------------------------------------------------- driver


async def discover_diagnostic(target: StdioServerParameters | str) -> str:
    """Send one bare `server/discover` on a fresh connection and report the raw answer."""
    transport = stdio_client(target) if isinstance(target, StdioServerParameters) else streamable_http_client(target)
    async with transport as (read, write), ClientSession(read, write) as session:
        try:
            raw = await session.send_discover(MODERN_VERSION)
        except MCPError as exc:
            return f"server/discover -> JSON-RPC error {exc.code}: {exc.message}"
        return f"server/discover -> {json.dumps(raw, sort_keys=True)}"


async def run(target: StdioServerParameters | str, mode: str, c: Checks) -> None:
    c.step = ("connecting (initialize)" if mode == "legacy" else
              "connecting (server/discover probe; the SDK falls back to initialize if it fails)")
    person = Person()
    over_http = not isinstance(target, StdioServerParameters)

    async def approval(c: Checks, client: Client) -> None:
        await check_approval(c, client, person, mode, over_http)

    async with Client(target, mode=SDK_MODE[mode], cache=None, elicitation_callback=person) as client:
        check_protocol(c, client, mode)
        for check in (check_list_tools, check_sum, check_missing_arg, check_unknown_tool,
                      check_structured, approval):
            try:
                await check(c, client)
            except ValidationError as exc:
                # The SDK validates every result against the negotiated revision's wire schema
                # (e.g. 2026-07-28 tools/list needs resultType, ttlMs, cacheScope); keep going.
                c.fail(f"{c.step}: the SDK rejected the server's result as invalid for protocol "
                       f"{client.protocol_version}: {exc.title}: {shape_errors(exc)}")
            except RuntimeError as exc:
                # e.g. structuredContent not matching the tool's outputSchema.
                c.fail(f"{c.step}: the SDK rejected the server's answer: {exc}")
        c.step = "closing the connection"
    await check_not_askable(c, target, mode)
    if mode == "discover" and c.failures and c.failures[0].startswith("discover mode:"):
        c.step = "diagnostic server/discover probe"
        try:
            say(f"diagnostic: {await discover_diagnostic(target)}")
        except Exception as exc:  # noqa: BLE001 - diagnostics only
            say(f"diagnostic: bare server/discover probe failed: {describe(exc)}")


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    command: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1:]
    parser = argparse.ArgumentParser(
        description="MCP conformance client (official Python SDK, mcp==2.3.0).",
        usage="%(prog)s (--stdio -- COMMAND [ARGS...] | --http URL) [--mode discover|legacy] "
              "[--timeout S] [--verbose]")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--stdio", action="store_true", help="spawn the server (the command after --) over stdio")
    target.add_argument("--http", metavar="URL", help="streamable HTTP endpoint, e.g. http://127.0.0.1:PORT/mcp")
    parser.add_argument("--mode", choices=sorted(SDK_MODE), default="discover",
                        help="discover: SDK mode='auto' (server/discover, 2026-07-28); "
                             "legacy: SDK mode='legacy' (initialize handshake)")
    parser.add_argument("--timeout", type=float, default=60.0, help="overall timeout in seconds (default 60)")
    parser.add_argument("--verbose", action="store_true", help="SDK debug logging (shows the messages sent)")
    args = parser.parse_args(argv)
    if args.stdio and not command:
        parser.error("--stdio needs the server command after --")
    if args.http and command:
        parser.error("a command after -- is only used with --stdio")
    return args, command


def main() -> int:
    args, command = parse_args(sys.argv[1:])
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="[%(name)s] %(levelname)s %(message)s")
    if args.stdio:
        # Pass the caller's whole environment (the SDK default keeps only HOME, PATH, ...),
        # so e.g. RUST_LOG / RUST_BACKTRACE reach the server; its stderr goes to ours.
        target: StdioServerParameters | str = StdioServerParameters(
            command=command[0], args=command[1:], env=dict(os.environ))
        where = "stdio: " + " ".join(command)
    else:
        target = args.http
        where = f"http: {args.http}"
    say(f"mcp conformance client: {where}, mode {args.mode} (SDK mode={SDK_MODE[args.mode]!r})")

    c = Checks()

    async def guarded() -> None:
        with anyio.fail_after(args.timeout):
            await run(target, args.mode, c)

    try:
        anyio.run(guarded)
    except TimeoutError:
        say(f"FAIL: timed out after {args.timeout:g}s during step: {c.step}")
        return 1
    except KeyboardInterrupt:
        say(f"FAIL: interrupted during step: {c.step}")
        return 1
    except Exception as exc:  # noqa: BLE001 - report anything the SDK/transport raised
        leaves = flatten(exc)
        if any(isinstance(leaf, TimeoutError) for leaf in leaves):
            say(f"FAIL: timed out after {args.timeout:g}s during step: {c.step} ({describe(exc)})")
        else:
            say(f"FAIL: error during step: {c.step}: {describe(exc)}")
        return 1
    if c.failures:
        say(f"{len(c.failures)} check(s) failed")
        return 1
    say("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
