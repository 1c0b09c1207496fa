#!/usr/bin/env bash
# A study on one accelerator machine: serve a model with vLLM and run the standing test split with
# thinking on and off, and the follow-up C0-C4 matrix, then print wall times, calls/s and the comparison.
#
#     bash scripts/gpu_study.sh [--dry-run] MODEL_PATH [DEVICES]
#
# MODEL_PATH: weights on disk (a Hugging Face folder). DEVICES: the accelerators to use, as
# CUDA_VISIBLE_DEVICES takes them (default 0); the tensor-parallel size is their number. The model
# family picks vLLM's parsers (from FAMILY, else from the path: qwen3, llama-3.1 / llama3.1, gemma-3):
#   qwen3     --tool-call-parser hermes --reasoning-parser qwen3 (thinking on and off: two standing runs)
#   llama3.1  --tool-call-parser llama3_json (no thinking switch: one standing run)
#   gemma3    --tool-call-parser pythonic with a pythonic tool chat template (CHAT_TEMPLATE, or vLLM's
#             examples/tool_chat_template_gemma3_pythonic.jinja when the installed vLLM ships it)
# The live-parties arm (docs/live-parties.md): the standing test split at gap 1 played with the scripted parties and
# with live ones, the served model voicing the people and checking every text unless PARTY_NAME and PARTY_URL
# name another served model (a model that checks its own texts is a validity risk the docs name); LIVE=0 skips it.
# --dry-run prints every run's plan (commitbench run ... --dry-run) without serving anything.
# Environment: VLLM (the vllm command, default: vllm), PORT (8000), OUT (runs/gpu-study-<name>),
# SERVED_NAME (default: the folder's name), EXTRA_VLLM_ARGS, CHAT_TEMPLATE, FAMILY, READY_TIMEOUT_S (1800),
# LIVE (1), PARTY_NAME and PARTY_URL (default: the served model).
# Not run in CI; tests check its syntax and its dry run.
set -euo pipefail

DRY=0
if [ "${1:-}" = "--dry-run" ]; then DRY=1; shift; fi
if [ $# -lt 1 ]; then sed -n '2,20p' "$0"; exit 2; fi
MODEL_PATH="$1"
DEVICES="${2:-0}"
NAME="${SERVED_NAME:-$(basename "${MODEL_PATH%/}")}"
PORT="${PORT:-8000}"
URL="http://127.0.0.1:$PORT/v1"
OUT="${OUT:-runs/gpu-study-$NAME}"
VLLM="${VLLM:-vllm}"
READY_TIMEOUT_S="${READY_TIMEOUT_S:-1800}"

lower="$(echo "${FAMILY:-$MODEL_PATH}" | tr '[:upper:]' '[:lower:]')"
case "$lower" in
    *qwen3*) FAMILY=qwen3 ;;
    *llama-3.1*|*llama3.1*|*llama-3_1*|*llama3_1*) FAMILY=llama3.1 ;;
    *gemma-3*|*gemma3*) FAMILY=gemma3 ;;
    *) echo "cannot tell the model family from '$MODEL_PATH': set FAMILY=qwen3|llama3.1|gemma3" >&2; exit 2 ;;
esac
PARSERS=(--enable-auto-tool-choice)
THINKING=("")
case "$FAMILY" in
    qwen3)
        PARSERS+=(--tool-call-parser hermes --reasoning-parser qwen3)
        THINKING=('{"chat_template_kwargs": {"enable_thinking": true}}' '{"chat_template_kwargs": {"enable_thinking": false}}') ;;
    llama3.1)
        PARSERS+=(--tool-call-parser llama3_json)
        if [ -n "${CHAT_TEMPLATE:-}" ]; then PARSERS+=(--chat-template "$CHAT_TEMPLATE"); fi ;;
    gemma3)
        PARSERS+=(--tool-call-parser pythonic)
        template="${CHAT_TEMPLATE:-}"
        if [ -z "$template" ] && [ "$DRY" = 0 ]; then
            template="$(python -c 'import pathlib, vllm; p = pathlib.Path(vllm.__file__).parent.parent / "examples" / "tool_chat_template_gemma3_pythonic.jinja"; print(p if p.is_file() else "")' 2>/dev/null || true)"
        fi
        if [ -z "$template" ] && [ "$DRY" = 0 ]; then
            echo "Gemma 3's own chat template has no tools: set CHAT_TEMPLATE to a pythonic tool template" >&2; exit 2
        fi
        if [ -n "$template" ]; then PARSERS+=(--chat-template "$template"); fi ;;
esac

label() { case "$1" in *'true'*) echo thinking-on ;; *'false'*) echo thinking-off ;; *) echo default ;; esac; }
standing_args() {  # $1: extra body ('' for none)
    local args=(run standing --agent chat --model "$NAME" --base-url "$URL" --split test --concurrency 256
                --out "$OUT/standing-$(label "$1")")
    if [ -n "$1" ]; then args+=(--extra-body "$1"); fi
    printf '%s\n' "${args[@]}"
}
PARTY_NAME="${PARTY_NAME:-$NAME}"
PARTY_URL="${PARTY_URL:-$URL}"
live_config() {  # the live arm's config, written to $1
    local allow=false
    if [ "$PARTY_NAME" = "$NAME" ] && [ "$PARTY_URL" = "$URL" ]; then allow=true; fi
    cat > "$1" <<YAML
name: standing-live
env: commitbench/Standing-v0
agents: [chat]
models:
  - {name: tested, base_url: "$URL", settings: {model: "$NAME"}}
  - {name: party, base_url: "$PARTY_URL", settings: {model: "$PARTY_NAME"}}
party_model: party
parties: [scripted, live]
judge: {kind: llm, model: {name: checker, base_url: "$PARTY_URL", settings: {model: "$PARTY_NAME"}}, allow_tested_model: $allow}
episodes: {split: test, gaps: [1]}
concurrency: 256
YAML
}
followup_args=(run followup --model "$NAME" --base-url "$URL" --setups C0 C1 C2 C3 C4 --concurrency 256
               --out "$OUT/followup")

if [ "$DRY" = 1 ]; then
    echo "family $FAMILY; vllm serve $MODEL_PATH --served-model-name $NAME ${PARSERS[*]} (devices $DEVICES)"
    for extra in "${THINKING[@]}"; do
        mapfile -t args < <(standing_args "$extra")
        commitbench "${args[@]}" --dry-run
    done
    commitbench "${followup_args[@]}" --dry-run
    if [ "${LIVE:-1}" = 1 ]; then
        live_yaml="$(mktemp)"; live_config "$live_yaml"
        commitbench run "$live_yaml" --out "$OUT/standing-live" --dry-run; rm -f "$live_yaml"
    fi
    exit 0
fi

n_devices=$(( $(echo "$DEVICES" | tr -cd ',' | wc -c) + 1 ))
mkdir -p "$OUT"
echo "serving $MODEL_PATH as $NAME on devices $DEVICES (tensor parallel $n_devices), family $FAMILY"
# shellcheck disable=SC2086  # EXTRA_VLLM_ARGS is a list of words on purpose
CUDA_VISIBLE_DEVICES="$DEVICES" setsid "$VLLM" serve "$MODEL_PATH" --served-model-name "$NAME" --port "$PORT" \
    --host 127.0.0.1 --tensor-parallel-size "$n_devices" "${PARSERS[@]}" ${EXTRA_VLLM_ARGS:-} \
    >"$OUT/server.log" 2>&1 &
SERVER=$!
trap 'kill -TERM -- "-$SERVER" 2>/dev/null || true' EXIT INT TERM
for _ in $(seq 1 "$READY_TIMEOUT_S"); do
    if curl -sf "$URL/models" >/dev/null 2>&1; then break; fi
    if ! kill -0 "$SERVER" 2>/dev/null; then echo "vLLM exited; see $OUT/server.log" >&2; tail -30 "$OUT/server.log" >&2; exit 1; fi
    sleep 1
done
curl -sf "$URL/models" >/dev/null || { echo "vLLM did not answer within $READY_TIMEOUT_S s" >&2; exit 1; }

summary="$OUT/summary.txt"; : > "$summary"
timed() {  # name, then the commitbench arguments
    local name="$1"; shift
    local t0; t0=$(date +%s.%N)
    commitbench "$@" --no-report 2> >(tee "$OUT/$name.err" >&2)
    local calls; calls=$(grep -o '[0-9]* model calls' "$OUT/$name.err" | tail -1 | cut -d' ' -f1)
    python -c 'import sys, time; t0, calls, name = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]; wall = time.time() - t0
print(f"{name}: wall {wall:.1f} s, {calls} model calls, {calls / wall:.2f} calls/s")' "$t0" "${calls:-0}" "$name" \
        | tee -a "$summary"
}
for extra in "${THINKING[@]}"; do
    mapfile -t args < <(standing_args "$extra")
    timed "standing-$(label "$extra")" "${args[@]}"
done
timed followup "${followup_args[@]}"
if [ "${LIVE:-1}" = 1 ]; then
    live_config "$OUT/live.yaml"
    timed standing-live run "$OUT/live.yaml" --out "$OUT/standing-live"
fi

echo; cat "$summary"
for dir in "$OUT"/standing-* "$OUT/followup"; do
    [ -d "$dir" ] || continue
    echo; echo "== $(basename "$dir")"; commitbench report "$dir"
done
if [ "${#THINKING[@]}" = 2 ]; then
    echo; echo "== thinking on vs off (standing, explicit and silent policies)"
    python - "$OUT/standing-thinking-on" "$OUT/standing-thinking-off" <<'PY'
import json, subprocess, sys
rows = {}
for path in sys.argv[1:]:
    report = json.loads(subprocess.run(["commitbench", "report", path, "--json"], check=True,
                                       capture_output=True, text=True).stdout)
    for m in report["metrics"]:
        key = (m["group"].get("policy", ""), m["metric"])
        rows.setdefault(key, {})[path.rsplit("-", 2)[-2] + "-" + path.rsplit("-", 1)[-1]] = m
print(f"{'policy':<10} {'metric':<28} {'thinking on':>22} {'thinking off':>22}")
for (policy, metric), cols in sorted(rows.items()):
    def cell(m):
        if m is None or m["estimate"] is None:
            return "-"
        ci = f" [{100 * m['low']:.0f},{100 * m['high']:.0f}]" if m["low"] is not None else f" n/a ({m.get('clusters')} clusters)"
        return f"{100 * m['estimate']:.0f}{ci}"
    print(f"{policy:<10} {metric:<28} {cell(cols.get('thinking-on')):>22} {cell(cols.get('thinking-off')):>22}")
PY
fi
