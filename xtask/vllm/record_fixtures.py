"""Records a real vLLM's replies as the fixtures the vLLM mock is checked against.

Run against the server `cargo xtask server --engine vllm` starts (served name
qwen2.5-coder-0.5b, --max-model-len 8192, --enable-auto-tool-choice --tool-call-parser
hermes), it writes one JSON file per case into OUT_DIR (test-utils/fixtures/vllm/):
the request, the status, the content type and the body as the server sent it (parsed
when it is JSON, else the raw text, such as an SSE stream). A long prompt is written as
`{"repeat": TEXT, "times": N}` in place of its content, and expanded when sent.
test-utils/src/mock_vllm.rs's tests replay each request to the mock and compare.

Only the Python standard library: it runs with any python3.

Usage: python record_fixtures.py BASE_URL OUT_DIR   (BASE_URL ends in /v1)
"""

import json
import sys
import urllib.error
import urllib.request
from pathlib import Path

MODEL = "qwen2.5-coder-0.5b"
TOOLS = [{
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a text file and return its contents.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "The file path"}},
            "required": ["path"],
        },
    },
}]
ASK = "Use the read_file tool to read config.toml, then tell me which port it sets."


def chat(content, **fields):
    body = {"model": MODEL, "messages": [{"role": "user", "content": content}],
            "temperature": 0, "seed": 42}
    body.update(fields)
    return {"method": "POST", "path": "/v1/chat/completions", "body": body}


def tools(**fields):
    return chat(ASK, tools=TOOLS, max_tokens=128, **fields)


STREAM = {"stream": True, "stream_options": {"include_usage": True}}
NAMED = {"type": "function", "function": {"name": "read_file"}}

CASES = {
    "models": {"method": "GET", "path": "/v1/models"},
    "tokenize": {"method": "POST", "path": "/tokenize",
                 "body": {"model": MODEL, "prompt": "Counting tokens exactly: naïve café"}},
    "tokenize_llama_form": {"method": "POST", "path": "/tokenize",
                            "body": {"content": "Counting tokens"}},
    "plain": chat("The capital of France is", max_tokens=8),
    "plain_stream": chat("The capital of France is", max_tokens=8, **STREAM),
    "unknown_model": dict(chat("hi", max_tokens=4), body={**chat("hi", max_tokens=4)["body"],
                                                         "model": "no-such-model"}),
    "unknown_model_stream": dict(chat("hi", max_tokens=4), body={
        **chat("hi", max_tokens=4, stream=True)["body"], "model": "no-such-model"}),
    "prompt_over_window": chat({"repeat": "word ", "times": 9000}, max_tokens=16),
    "prompt_over_window_stream": chat({"repeat": "word ", "times": 9000}, max_tokens=16,
                                      stream=True),
    "max_tokens_over_window": chat("hi", max_tokens=9000),
    "prompt_plus_max_tokens_over_window": chat({"repeat": "word ", "times": 8100},
                                               max_tokens=200),
    "tools_auto": tools(),
    "tools_auto_stream": tools(**STREAM),
    "tools_required": tools(tool_choice="required"),
    "tools_required_stream": tools(tool_choice="required", **STREAM),
    "tools_named": tools(tool_choice=NAMED),
    "tools_named_stream": tools(tool_choice=NAMED, **STREAM),
}


def expand(value):
    """The request body as sent: `{"repeat", "times"}` becomes the repeated text."""
    if isinstance(value, dict):
        if set(value) == {"repeat", "times"}:
            return value["repeat"] * value["times"]
        return {k: expand(v) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v) for v in value]
    return value


def send(root, case):
    data = None
    if "body" in case:
        data = json.dumps(expand(case["body"])).encode()
    request = urllib.request.Request(root + case["path"], data=data, method=case["method"],
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=300) as reply:
            return reply.status, reply.headers.get("content-type", ""), reply.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("content-type", ""), e.read().decode()


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    base, out = sys.argv[1].rstrip("/"), Path(sys.argv[2])
    root = base.removesuffix("/v1")
    out.mkdir(parents=True, exist_ok=True)
    for name, case in CASES.items():
        status, content_type, text = send(root, case)
        try:
            body = json.loads(text)
        except ValueError:
            body = text
        record = {"request": case, "status": status,
                  "content_type": content_type.split(";")[0], "body": body}
        (out / f"{name}.json").write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
        print(f"{name}: {status} {content_type}")


if __name__ == "__main__":
    main()
