// A minimal OpenAI-compatible server for a local GGUF model through node-llama-cpp, on
// 127.0.0.1 only. POST /v1/chat/completions: the messages' contents are joined and completed as
// raw text (the model is a base model; the runner file carries a few-shot template), greedy,
// stopping at the end of the line. Usage counts are the model's own tokenizer's. One request at a
// time, one thread. The sequence keeps the previous prompt, so a prompt sharing its prefix is
// evaluated only past that prefix; `"cache_prompt": false` (llama.cpp server's field, sent by
// `svc run --cache-neutral`) clears that history first so every prompt is evaluated in full.
import http from "node:http";
import crypto from "node:crypto";
import { getLlama, LlamaCompletion } from "node-llama-cpp";

const modelPath = process.env.SVC_GEMMA_MODEL;
const port = Number(process.env.SVC_GEMMA_PORT || 8091);
const llama = await getLlama({ gpu: false });
const model = await llama.loadModel({ modelPath });
const context = await model.createContext({ contextSize: 8192, threads: 1 });
const sequence = context.getSequence();
const completion = new LlamaCompletion({ contextSequence: sequence });

let queue = Promise.resolve();
function serialized(work) {
  const next = queue.then(work, work);
  queue = next.catch(() => {});
  return next;
}

function send(res, status, body) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

const server = http.createServer((req, res) => {
  if (req.method === "GET" && req.url === "/health") return send(res, 200, { status: "ok" });
  if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
    return send(res, 404, { error: { message: "only POST /v1/chat/completions" } });
  }
  let raw = "";
  req.on("data", (chunk) => (raw += chunk));
  req.on("end", async () => {
    let body;
    try {
      body = JSON.parse(raw);
    } catch {
      return send(res, 400, { error: { message: "invalid JSON" } });
    }
    const prompt = (body.messages || []).map((m) => m.content).filter(Boolean).join("\n\n");
    try {
      const text = await serialized(async () => {
        if (body.cache_prompt === false) await sequence.clearHistory();
        return completion.generateCompletion(prompt, {
          maxTokens: body.max_tokens || 24,
          temperature: 0,
          customStopTriggers: ["\n"],
        });
      });
      const answer = text.trim();
      send(res, 200, {
        id: "chatcmpl-" + crypto.randomUUID(),
        object: "chat.completion",
        model: body.model,
        choices: [{ index: 0, message: { role: "assistant", content: answer }, finish_reason: "stop" }],
        usage: {
          prompt_tokens: model.tokenize(prompt).length,
          completion_tokens: model.tokenize(text).length,
          total_tokens: model.tokenize(prompt).length + model.tokenize(text).length,
        },
      });
    } catch (error) {
      send(res, 500, { error: { message: String(error) } });
    }
  });
});
server.listen(port, "127.0.0.1");
