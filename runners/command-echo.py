"""Example command runner: reads the request JSON on stdin, answers with the first context line
sharing a word with the question, prints the response JSON on stdout. Counts are whitespace words
(a command runner reports its own usage)."""
import json
import sys

request = json.load(sys.stdin)
question = {w.lower().strip("?.,") for w in request["question"].split()}
answer = "unknown"
for line in request["context"].splitlines():
    if question & {w.lower().strip("?.,") for w in line.split()}:
        answer = line.strip()
        break
print(json.dumps({
    "text": answer,
    "usage": {"input_tokens": len(request["prompt"].split()), "output_tokens": len(answer.split())},
}))
