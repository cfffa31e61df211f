"""End-to-end: the official Python MCP SDK (`mcp` on PyPI) talks to `svc serve` over stdio and
to `svc serve --http 0` over streamable HTTP: list the tools, call each one, an invalid call
(an error result, the session goes on), then a valid call again.

Usage: python mcp_client.py PATH_TO_SVC_BINARY   (run by `make e2e`; exit 0 when every check holds)
"""

import json
import os
import re
import subprocess
import sys
import tempfile

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CODE = os.path.join(ROOT, "fixtures", "code")
TOOLS = {
    "prepare_proof_guided_context", "advance_proof_guided_context", "inspect_proof_guided_context",
    "compress", "compress_messages", "select_context", "recover_chunk", "verify_answer",
}
failures = []


def check(name, condition, detail=""):
    print(("ok   " if condition else "FAIL ") + name + ("" if condition else f": {detail}"))
    if not condition:
        failures.append(name)


def result_json(result):
    """The JSON document a successful call returned (its text content)."""
    return json.loads(result.content[0].text)


async def exercise(session, transport):
    await session.initialize()
    tools = (await session.list_tools()).tools
    check(f"{transport}: tools/list names the eight tools", {t.name for t in tools} == TOOLS,
          sorted(t.name for t in tools))
    check(f"{transport}: every tool has an object input schema",
          all(t.input_schema.get("type") == "object" for t in tools))

    selected = await session.call_tool("select_context", {
        "path": CODE, "query": "edit distance between two strings", "budget": 400})
    check(f"{transport}: select_context", not selected.is_error, selected.content)
    selection = result_json(selected)
    check(f"{transport}: select_context within budget", selection["tokens"] <= 400, selection["tokens"])
    chunk = (selection["omitted"] or selection["sent"])[0]
    recovered = await session.call_tool("recover_chunk", {
        "ctx_id": selection["ctx_id"], "chunk_id": chunk["chunk_id"]})
    text = result_json(recovered)["text"]
    with open(os.path.join(CODE, chunk["path"]), encoding="utf-8") as f:
        original = f.read()
    check(f"{transport}: recover_chunk gives the exact bytes", text and text in original)

    compressed = result_json(await session.call_tool("compress", {"content": "word " * 2000, "budget": 50}))
    check(f"{transport}: compress within budget", compressed["tokens"] <= 50, compressed["tokens"])
    messages = result_json(await session.call_tool("compress_messages", {"budget": 60, "messages": [
        {"role": "user", "content": "Summarise the log."},
        {"role": "assistant", "content": "line ok\n" * 500},
        {"role": "user", "content": "What failed?"}]}))
    check(f"{transport}: compress_messages keeps the last user turn",
          messages["messages"][2]["content"] == "What failed?")
    verified = result_json(await session.call_tool("verify_answer", {
        "context": "Paris is the capital of France.", "answer": "Paris is the capital of France.",
        "profile": "qa"}))
    check(f"{transport}: verify_answer", verified["certificate"]["status"] == "supported",
          verified["certificate"]["status"])

    prepared = result_json(await session.call_tool("prepare_proof_guided_context", {
        "documents": [{"name": "capitals.md",
                       "text": "# Capitals\n\nParis is the capital of France.\n\nRome is the capital of Italy.\n"}],
        "query": "What is the capital of France?", "budget": 300}))
    check(f"{transport}: prepare opens a session", prepared["session_id"].startswith("pgs_"))
    advanced = result_json(await session.call_tool("advance_proof_guided_context", {
        "session_id": prepared["session_id"], "draft": "Paris is the capital of France."}))
    check(f"{transport}: advance finishes supported", advanced["status"] == "supported", advanced["status"])
    view = result_json(await session.call_tool("inspect_proof_guided_context",
                                               {"session_id": prepared["session_id"]}))
    check(f"{transport}: inspect", view["state"] == "finished", view["state"])

    bad = await session.call_tool("select_context", {"path": CODE, "query": "x", "budget": "big"})
    message = bad.content[0].text if bad.content else ""
    check(f"{transport}: invalid arguments are an error result naming the field",
          bad.is_error and "`budget`" in message, message)
    again = await session.call_tool("recover_chunk", {
        "ctx_id": selection["ctx_id"], "chunk_id": chunk["chunk_id"]})
    check(f"{transport}: the session goes on", not again.is_error and result_json(again)["text"] == text)


async def over_stdio(svc, state):
    params = StdioServerParameters(command=svc, args=["serve"], env={"SVC_HOME": state}, cwd=ROOT)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await exercise(session, "stdio")


async def over_http(svc, state):
    server = subprocess.Popen([svc, "serve", "--http", "0"], env={**os.environ, "SVC_HOME": state},
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, cwd=ROOT)
    try:
        url = re.search(r"http://127\.0\.0\.1:\d+/mcp", server.stderr.readline()).group(0)
        async with streamable_http_client(url) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await exercise(session, "http")
    finally:
        server.terminate()
        server.wait()


def main():
    svc = os.path.abspath(sys.argv[1])
    state = tempfile.mkdtemp()
    anyio.run(over_stdio, svc, state)
    anyio.run(over_http, svc, state)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
