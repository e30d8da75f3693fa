#!/usr/bin/env bash
# A real NVIDIA Dynamo 1.6.1 on CPU, offline: one frontend (KV router, header session affinity)
# and N `dynamo.mocker` workers (simulated engines, no GPU, no model weights), discovering each
# other through a folder (file discovery, TCP request plane, ZMQ event plane).
#
#   scripts/dynamo-cpu.sh install            # venv + wheels + minimal deps + offline tokenizer
#   scripts/dynamo-cpu.sh start [options]    # background processes; waits until a chat answers
#   scripts/dynamo-cpu.sh stop  [--run-dir D]
#   scripts/dynamo-cpu.sh status [--run-dir D]
#
# start options (each also an environment variable):
#   --port N              DYNAMO_PORT (8088; 0 = pick a free port)
#   --workers N           DYNAMO_WORKERS (2)
#   --ttl SECS|off        DYNAMO_AFFINITY_TTL (300; 0 or "off" = no session affinity)
#   --affinity-mode M     DYNAMO_AFFINITY_MODE (hard|soft; default: Dynamo's, hard)
#   --router-mode M       DYNAMO_ROUTER_MODE (kv)
#   --speedup X           DYNAMO_SPEEDUP (100; the mocker's --speedup-ratio, 0 = no delays)
#   --model-name NAME     DYNAMO_MODEL_NAME (dynamo-tiny)
#   --run-dir D           DYNAMO_RUN_DIR (var/dynamo-run): logs, pids, discovery folder
#   --system-port-base N  DYNAMO_SYSTEM_PORT_BASE (unset): worker i serves /metrics on N+i
#   --timeout SECS        DYNAMO_START_TIMEOUT (90)
# Extra arguments: DYNAMO_FRONTEND_ARGS, DYNAMO_MOCKER_ARGS (split on spaces).
# Paths: DYNAMO_VENV (var/dynamo-venv), DYNAMO_MODEL_DIR (var/dynamo-model), PYTHON (python3).
#
# Why not `pip install ai-dynamo`: its requirements pull `aisimulate`, a stub whose build
# downloads from a registry this machine cannot reach, plus transformers/kubernetes/redis that
# the frontend and the mocker never import. The two wheels go in with --no-deps and the few
# modules they do import are installed by name (list below, found by starting both).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DYNAMO_VERSION=1.6.1
VENV="${DYNAMO_VENV:-$ROOT/var/dynamo-venv}"
MODEL_DIR="${DYNAMO_MODEL_DIR:-$ROOT/var/dynamo-model}"
RUN_DIR="${DYNAMO_RUN_DIR:-$ROOT/var/dynamo-run}"
PYTHON="${PYTHON:-python3}"
PORT="${DYNAMO_PORT:-8088}"
WORKERS="${DYNAMO_WORKERS:-2}"
TTL="${DYNAMO_AFFINITY_TTL:-300}"
AFFINITY_MODE="${DYNAMO_AFFINITY_MODE:-}"
ROUTER_MODE="${DYNAMO_ROUTER_MODE:-kv}"
SPEEDUP="${DYNAMO_SPEEDUP:-100}"
MODEL_NAME="${DYNAMO_MODEL_NAME:-dynamo-tiny}"
SYSTEM_PORT_BASE="${DYNAMO_SYSTEM_PORT_BASE:-}"
START_TIMEOUT="${DYNAMO_START_TIMEOUT:-90}"
# The runtime dependencies the frontend and the mocker import (ai-dynamo-runtime's own two,
# then what `python -m dynamo.frontend` / `python -m dynamo.mocker` need), and `tokenizers`
# to build the offline tokenizer.
DEPS=(
  "pydantic>=2.10.6,<=2.13.5"
  "uvloop>=0.21.0"
  "msgspec>=0.19.0"
  "packaging"
  "pyyaml"
  "tokenizers>=0.20"
)
STAMP="$VENV/.dynamo-cpu-$DYNAMO_VERSION"
MODEL_STAMP="$MODEL_DIR/.dynamo-cpu-model-v1"

say() { echo "dynamo-cpu: $*"; }
# pip, without two kinds of expected noise: this machine's pip config names local index folders
# that may not exist, and the resolver lists ai-dynamo's requirements skipped on purpose.
pip_q() {
  local out rc=0
  out=$("$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@" 2>&1) || rc=$?
  printf '%s\n' "$out" \
    | grep -vE "^WARNING: Location '.*' is ignored|dependency resolver does not currently|^ai-dynamo $DYNAMO_VERSION requires |^$" \
    || true
  return "$rc"
}
die() { echo "dynamo-cpu: error: $*" >&2; exit 1; }

# ----------------------------------------------------------------------------------------------
# install
# ----------------------------------------------------------------------------------------------
build_model() {
  # A byte-level BPE trained on the local Python standard library sources (any text would do:
  # the mocker only needs a tokenizer and a chat template to count and emit tokens), a
  # ChatML-style template, and a llama-shaped config.json whose sizes let the mocker size its
  # KV cache without importing transformers. Written to a temp folder, then moved in place.
  local tmp="$MODEL_DIR.tmp.$$"
  rm -rf "$tmp"
  "$VENV/bin/python" - "$tmp" <<'PY'
import json
import sys
import sysconfig
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

out = Path(sys.argv[1])
specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

def corpus():
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    size = 0
    for path in sorted(stdlib.glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        size += len(text)
        yield text
        if size > 2_000_000:
            break

tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(
    vocab_size=4096,
    special_tokens=specials,
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    show_progress=False,
)
tok.train_from_iterator(corpus(), trainer)
out.mkdir(parents=True)
tok.save(str(out / "tokenizer.json"))
bos, eos = tok.token_to_id("<|endoftext|>"), tok.token_to_id("<|im_end|>")
template = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
files = {
    "tokenizer_config.json": {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 131072,
        "bos_token": "<|endoftext|>",
        "eos_token": "<|im_end|>",
        "unk_token": "<|endoftext|>",
        "pad_token": "<|endoftext|>",
        "chat_template": template,
    },
    "config.json": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": tok.get_vocab_size(),
        "hidden_size": 512,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "max_position_embeddings": 131072,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "torch_dtype": "bfloat16",
    },
    "generation_config.json": {"bos_token_id": bos, "eos_token_id": eos},
}
for name, data in files.items():
    (out / name).write_text(json.dumps(data, indent=1) + "\n")
print(f"tokenizer vocab {tok.get_vocab_size()}")
PY
  touch "$tmp/$(basename "$MODEL_STAMP")"
  rm -rf "$MODEL_DIR"
  mkdir -p "$(dirname "$MODEL_DIR")"
  mv "$tmp" "$MODEL_DIR"
}

cmd_install() {
  local t0=$SECONDS
  if [ -f "$STAMP" ] && [ -x "$VENV/bin/python" ]; then
    say "venv ready: $VENV (ai-dynamo $DYNAMO_VERSION)"
  else
    if [ ! -x "$VENV/bin/python" ]; then
      say "creating venv $VENV"
      "$PYTHON" -m venv "$VENV"
    fi
    say "installing ai-dynamo $DYNAMO_VERSION (--no-deps) and its runtime dependencies"
    pip_q --no-deps "ai-dynamo==$DYNAMO_VERSION" "ai-dynamo-runtime==$DYNAMO_VERSION" \
      || die "pip could not install the ai-dynamo $DYNAMO_VERSION wheels"
    pip_q "${DEPS[@]}" || die "pip could not install ${DEPS[*]}"
    # Both entry points must parse their arguments (this imports everything they load at start).
    (cd "$RUN_TMP" && HF_HUB_OFFLINE=1 "$VENV/bin/python" -m dynamo.frontend --help >/dev/null) \
      || die "python -m dynamo.frontend does not start in $VENV"
    (cd "$RUN_TMP" && HF_HUB_OFFLINE=1 "$VENV/bin/python" -m dynamo.mocker --help >/dev/null) \
      || die "python -m dynamo.mocker does not start in $VENV"
    touch "$STAMP"
  fi
  if [ -f "$MODEL_STAMP" ]; then
    say "model folder ready: $MODEL_DIR"
  else
    say "building the offline tokenizer/model folder $MODEL_DIR"
    build_model
  fi
  say "install done in $((SECONDS - t0)) s"
}

# ----------------------------------------------------------------------------------------------
# start / stop / status
# ----------------------------------------------------------------------------------------------
is_ours() {  # pid -> true when it is a live dynamo process (a stale pid file is ignored)
  local pid=$1
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'dynamo\.'
}

cmd_stop() {
  local f pid any=0
  shopt -s nullglob
  for f in "$RUN_DIR"/*.pid; do
    pid=$(cat "$f")
    if is_ours "$pid"; then
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
      any=1
    fi
  done
  if [ "$any" = 1 ]; then
    for _ in $(seq 1 50); do
      any=0
      for f in "$RUN_DIR"/*.pid; do is_ours "$(cat "$f")" && any=1; done
      [ "$any" = 0 ] && break
      sleep 0.2
    done
    for f in "$RUN_DIR"/*.pid; do
      pid=$(cat "$f")
      if is_ours "$pid"; then kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true; fi
    done
    say "stopped ($RUN_DIR)"
  fi
  rm -f "$RUN_DIR"/*.pid "$RUN_DIR/url"
  shopt -u nullglob
}

cmd_status() {
  local f alive=0
  shopt -s nullglob
  for f in "$RUN_DIR"/*.pid; do
    if is_ours "$(cat "$f")"; then alive=$((alive + 1)); echo "$(basename "$f" .pid): pid $(cat "$f")"; fi
  done
  shopt -u nullglob
  if [ "$alive" -gt 0 ] && [ -f "$RUN_DIR/url" ]; then cat "$RUN_DIR/url"; return 0; fi
  echo "not running ($RUN_DIR)"
  return 1
}

free_port() {
  "$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

launch() {  # name, command... : detached in its own session, output to RUN_DIR/name.log
  local name=$1; shift
  setsid "$@" </dev/null >"$RUN_DIR/$name.log" 2>&1 9>&- &
  echo $! >"$RUN_DIR/$name.pid"
}

# Polls the frontend until it lists the model, has WORKERS workers, and answers a 1-token chat.
wait_ready() {
  "$VENV/bin/python" - "$URL" "$MODEL_NAME" "$WORKERS" "$START_TIMEOUT" "$RUN_DIR" <<'PY'
import json
import sys
import time
import urllib.request
from pathlib import Path

url, model, workers, timeout, run_dir = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), Path(sys.argv[5])
deadline = time.monotonic() + timeout

def get(path):
    with urllib.request.urlopen(url + path, timeout=5) as r:
        return r.read().decode()

def alive():
    for pid_file in run_dir.glob("*.pid"):
        if not Path(f"/proc/{pid_file.read_text().strip()}").exists():
            sys.exit(f"{pid_file.stem} exited; see {run_dir / (pid_file.stem + '.log')}")

step = "model listed"
chat = json.dumps({"model": model, "max_tokens": 1,
                   "messages": [{"role": "user", "content": "ping"}]}).encode()
while time.monotonic() < deadline:
    alive()
    try:
        if step == "model listed":
            if any(m.get("id") == model for m in json.loads(get("/v1/models")).get("data", [])):
                step = "workers registered"
        if step == "workers registered":
            # Each mocker registers its generate endpoint as one file in the discovery folder.
            found = list((run_dir / "discovery" / "v1" / "instances").glob("*generate*"))
            if len(found) >= workers:
                step = "chat"
        if step == "chat":
            req = urllib.request.Request(url + "/v1/chat/completions", data=chat,
                                         headers={"content-type": "application/json"})
            with urllib.request.urlopen(req, timeout=10) as r:
                if json.loads(r.read()).get("choices"):
                    step = "router sees all workers"
        if step == "router sees all workers":
            # One series per worker the KV router tracks (present after a first request).
            n = sum(1 for line in get("/metrics").splitlines()
                    if line.startswith("dynamo_component_router_worker_registered{")
                    and line.endswith(" 1"))
            if n >= workers:
                sys.exit(0)
    except (OSError, ValueError):
        pass
    time.sleep(0.25)
sys.exit(f"not ready after {timeout:.0f} s (waiting for: {step}); logs in {run_dir}")
PY
}

cmd_start() {
  [ -f "$STAMP" ] || die "Dynamo is not installed in $VENV: run scripts/dynamo-cpu.sh install"
  [ -f "$MODEL_STAMP" ] || die "no model folder $MODEL_DIR: run scripts/dynamo-cpu.sh install"
  if cmd_status >/dev/null 2>&1; then
    say "already running"
    cat "$RUN_DIR/url"
    return 0
  fi
  cmd_stop >/dev/null
  [[ "$WORKERS" =~ ^[1-9][0-9]*$ ]] || die "--workers must be a positive integer"
  [ "$PORT" = 0 ] && PORT=$(free_port)
  URL="http://127.0.0.1:$PORT"
  local kv="$RUN_DIR/discovery"
  rm -rf "$kv"
  mkdir -p "$kv"
  local t0=$SECONDS
  local transport=(--discovery-backend file --request-plane tcp --event-plane zmq)
  local fe=(--router-mode "$ROUTER_MODE" --http-host 127.0.0.1 --http-port "$PORT")
  case "$TTL" in
    0 | off | "") ;;
    *)
      fe+=(--router-session-affinity-ttl-secs "$TTL")
      [ -n "$AFFINITY_MODE" ] && fe+=(--router-session-affinity-mode "$AFFINITY_MODE")
      ;;
  esac
  # shellcheck disable=SC2206
  fe+=(${DYNAMO_FRONTEND_ARGS:-})
  # Everything on loopback; no hub lookups; no colour codes in the log files.
  export DYN_FILE_KV="$kv" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 NO_COLOR=1
  export DYN_TCP_RPC_HOST=127.0.0.1 DYN_TCP_RESPONSE_STREAM_HOST=127.0.0.1
  export DYN_EVENT_PLANE_HOST=127.0.0.1 DYN_SYSTEM_HOST=127.0.0.1 PYTHONHASHSEED=0
  cd "$RUN_DIR"
  launch frontend "$VENV/bin/python" -m dynamo.frontend "${transport[@]}" "${fe[@]}"
  local i mk
  for ((i = 0; i < WORKERS; i++)); do
    mk=(--model-path "$MODEL_DIR" --model-name "$MODEL_NAME" --speedup-ratio "$SPEEDUP")
    # shellcheck disable=SC2206
    mk+=(${DYNAMO_MOCKER_ARGS:-})
    if [ -n "$SYSTEM_PORT_BASE" ]; then
      DYN_SYSTEM_PORT=$((SYSTEM_PORT_BASE + i)) DYN_SYSTEM_ENABLED=true \
        launch "mocker-$i" "$VENV/bin/python" -m dynamo.mocker "${transport[@]}" "${mk[@]}"
    else
      launch "mocker-$i" "$VENV/bin/python" -m dynamo.mocker "${transport[@]}" "${mk[@]}"
    fi
  done
  if ! wait_ready; then
    cmd_stop >/dev/null
    die "start failed; logs in $RUN_DIR"
  fi
  printf 'DYNAMO_URL=%s\nDYNAMO_MODEL=%s\n' "$URL" "$MODEL_NAME" >"$RUN_DIR/url"
  say "ready in $((SECONDS - t0)) s: frontend + $WORKERS mocker(s), router $ROUTER_MODE, affinity ttl $TTL; logs in $RUN_DIR"
  cat "$RUN_DIR/url"
}

# ----------------------------------------------------------------------------------------------
cmd="${1:-}"
[ $# -gt 0 ] && shift
while [ $# -gt 0 ]; do
  case "$1" in
    --port) PORT=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --ttl) TTL=$2; shift 2 ;;
    --affinity-mode) AFFINITY_MODE=$2; shift 2 ;;
    --router-mode) ROUTER_MODE=$2; shift 2 ;;
    --speedup) SPEEDUP=$2; shift 2 ;;
    --model-name) MODEL_NAME=$2; shift 2 ;;
    --run-dir) RUN_DIR=$2; shift 2 ;;
    --system-port-base) SYSTEM_PORT_BASE=$2; shift 2 ;;
    --timeout) START_TIMEOUT=$2; shift 2 ;;
    *) die "unknown option $1" ;;
  esac
done
VENV="$(realpath -m "$VENV")"
MODEL_DIR="$(realpath -m "$MODEL_DIR")"
STAMP="$VENV/.dynamo-cpu-$DYNAMO_VERSION"
MODEL_STAMP="$MODEL_DIR/.dynamo-cpu-model-v1"
mkdir -p "$RUN_DIR"
RUN_DIR="$(cd "$RUN_DIR" && pwd)"
RUN_TMP="$RUN_DIR"
if [ "$cmd" = start ] || [ "$cmd" = stop ]; then
  # One start/stop at a time per run folder (the processes started do not inherit the lock).
  # A holder that outlives its wait (a crashed start) is passed over after a notice.
  exec 9>"$RUN_DIR/.lock"
  if [ "$cmd" = start ]; then wait_lock=120; else wait_lock=15; fi
  flock -w "$wait_lock" 9 || say "lock $RUN_DIR/.lock still held after ${wait_lock} s; going on"
fi
case "$cmd" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) sed -n '2,25p' "$0"; exit 2 ;;
esac
