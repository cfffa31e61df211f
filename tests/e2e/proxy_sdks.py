"""End-to-end: the official OpenAI, Anthropic and Google GenAI Python SDKs talk to `svc proxy`
with only their base URL changed; the proxy forwards to a fake upstream that answers with the
recorded fixtures of fixtures/proxy/ and records what it received.

Usage: python proxy_sdks.py PATH_TO_SVC_BINARY   (run by `make e2e`; exit 0 when every check holds)
"""

import http.server
import json
import os
import re
import subprocess
import sys
import tempfile
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "fixtures", "proxy")
RECEIVED = []


class Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        RECEIVED.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
        stream = b'"stream":true' in body.replace(b" ", b"")
        path = self.path.split("?")[0]
        if path == "/v1/messages":
            name = "anthropic_stream.sse" if stream else "anthropic_message.json"
        elif path == "/v1/chat/completions":
            name = "openai_chat_stream.sse" if stream else "openai_chat.json"
        elif path == "/v1/responses":
            name = "openai_responses_stream.sse" if stream else "openai_responses.json"
        elif path.endswith(":streamGenerateContent"):
            name = "gemini_stream.sse"
        elif path.endswith(":generateContent"):
            name = "gemini_generate.json"
        else:
            self.send_response(404)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        data = open(os.path.join(FIXTURES, name), "rb").read()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream" if name.endswith(".sse") else "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


EXPECTED = "parse_config returns Ok for an empty file."
failures = []


def check(name, condition, detail=""):
    print(("ok   " if condition else "FAIL ") + name + ("" if condition else f": {detail}"))
    if not condition:
        failures.append(name)


def last(path_part):
    return [r for r in RECEIVED if path_part in r["path"]][-1]


def main():
    svc = sys.argv[1]
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    root = f"http://127.0.0.1:{upstream.server_address[1]}"
    state = tempfile.mkdtemp()
    proxy = subprocess.Popen(
        [svc, "proxy", "--port", "0", "--witness", "audit", "--state-dir", state,
         "--upstream-anthropic", root, "--upstream-openai", root, "--upstream-gemini", root],
        stderr=subprocess.PIPE, text=True)
    try:
        line = proxy.stderr.readline()
        base = re.search(r"http://[0-9.:]+", line).group(0)
        threading.Thread(target=lambda: [None for _ in proxy.stderr], daemon=True).start()
        run(base)
    finally:
        proxy.terminate()
        proxy.wait()
    print(f"{len(failures)} failures")
    return 1 if failures else 0


def run(base):
    import anthropic
    import openai
    from google import genai
    from google.genai import types

    client = openai.OpenAI(base_url=base + "/v1", api_key="sk-e2e")
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "Why does the build fail?"}])
    completion = raw.parse()
    check("openai chat", EXPECTED in completion.choices[0].message.content)
    check("openai chat witness header", raw.headers.get("x-svc-witness-id", "").startswith("wit_"))
    check("openai auth passes through", last("/chat/completions")["headers"].get("authorization") == "Bearer sk-e2e")
    text = "".join(chunk.choices[0].delta.content or "" for chunk in client.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "Why?"}], stream=True) if chunk.choices)
    check("openai chat stream", EXPECTED in text, text)
    response = client.responses.create(model="gpt-4.1", input="Why does the build fail?")
    check("openai responses", EXPECTED in response.output_text, response.output_text)
    text = "".join(getattr(event, "delta", "") or "" for event in client.responses.create(
        model="gpt-4.1", input="Why?", stream=True) if event.type == "response.output_text.delta")
    check("openai responses stream", EXPECTED in text, text)

    client = anthropic.Anthropic(base_url=base, api_key="sk-ant-e2e")
    message = client.messages.create(model="claude-e2e-model", max_tokens=64,
                                     messages=[{"role": "user", "content": "Why does the build fail?"}])
    check("anthropic messages", EXPECTED in message.content[0].text)
    received = last("/v1/messages")["headers"]
    # SDK versions send the key as x-api-key or as a bearer token: either must arrive as sent.
    check("anthropic auth passes through",
          "sk-ant-e2e" in (received.get("x-api-key", ""), received.get("authorization", "").removeprefix("Bearer ")),
          received)
    with client.messages.stream(model="claude-e2e-model", max_tokens=64,
                                messages=[{"role": "user", "content": "Why?"}]) as stream:
        text = "".join(stream.text_stream)
    check("anthropic messages stream", EXPECTED in text, text)

    client = genai.Client(api_key="g-e2e", http_options=types.HttpOptions(base_url=base))
    result = client.models.generate_content(model="gemini-2.0-flash", contents="Why does the build fail?")
    check("gemini generateContent", EXPECTED in result.text, result.text)
    check("gemini auth passes through", last(":generateContent")["headers"].get("x-goog-api-key") == "g-e2e")
    text = "".join(chunk.text or "" for chunk in client.models.generate_content_stream(
        model="gemini-2.0-flash", contents="Why?"))
    check("gemini streamGenerateContent", EXPECTED in text, text)


if __name__ == "__main__":
    sys.exit(main())
