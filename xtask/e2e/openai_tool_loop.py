"""A tool loop written with the official `openai` package, run by `cargo xtask e2e`.

It runs the same loop twice at temperature 0: directly against llama-server, then
through `ollm serve` in front of that server. Directly, the model's call (written as a
fenced JSON block in the content) is missed by the server's parser, so the loop gets no
`tool_calls`. Through `ollm serve` the call arrives as a structured, streamed
`tool_calls` entry, the loop runs its tool, sends the result back and gets the answer.

What is asserted is what ollm owes, not what the model chooses:
- when the model wrote a call as text, the client gets it as `tool_calls` (streamed
  and not), never as content;
- the streamed call reassembles into exactly the non-streamed one;
- the loop ends with an answer after the tool result, and no error.
The direct run is reported and checked only in what it proves: if the model wrote its
call as text there, llama-server returned no `tool_calls` for it. With
`--direct-gets-no-calls` (vLLM, `cargo xtask e2e --engine vllm`) the direct run must also
end without any `tool_calls`: vLLM's hermes parser reads only `<tool_call>` blocks, and
this model writes fenced JSON, so a plain client loop gets no call to run there.

Usage: python openai_tool_loop.py DIRECT_BASE_URL SERVED_BASE_URL MODEL [--direct-gets-no-calls]
"""

import json
import sys
import tempfile
from pathlib import Path

from openai import OpenAI

PORT = "8421"
MAX_TURNS = 4
ASK = "Use the read_file tool to read config.toml, then tell me which port it sets."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file and return its contents.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "The file's path"}},
                "required": ["path"],
            },
        },
    }
]


def fail(message):
    print(f"openai_tool_loop: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def read_file(folder, arguments):
    path = json.loads(arguments or "{}").get("path", "")
    try:
        return (folder / Path(path).name).read_text()
    except OSError as e:
        return f"Error: {e}"


def create(client, model, messages, stream):
    return client.chat.completions.create(
        model=model, messages=messages, tools=TOOLS, temperature=0, seed=42,
        max_tokens=256, stream=stream,
    )


def streamed(client, model, messages):
    """The streamed reply reassembled the way clients do: content, and calls by index."""
    content, calls = "", {}
    for chunk in create(client, model, messages, True):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for call in delta.tool_calls or []:
            entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
            entry["id"] += call.id or ""
            if call.function:
                entry["name"] += call.function.name or ""
                entry["arguments"] += call.function.arguments or ""
    return content, [calls[i] for i in sorted(calls)]


def looks_like_a_text_call(content):
    return "read_file" in (content or "") and "{" in (content or "")


def direct(base_url, model, no_calls):
    client = OpenAI(base_url=base_url, api_key="unused")
    reply = create(client, model, [{"role": "user", "content": ASK}], False)
    message = reply.choices[0].message
    calls = message.tool_calls or []
    print(f"direct: finish={reply.choices[0].finish_reason} tool_calls={len(calls)} "
          f"content={message.content!r}")
    if looks_like_a_text_call(message.content) and calls:
        fail("the server returned tool_calls AND the call as text")
    if no_calls and calls:
        fail(f"the server returned tool_calls directly: {calls}")
    return looks_like_a_text_call(message.content) and not calls


def through_serve(base_url, model, folder):
    client = OpenAI(base_url=base_url, api_key="unused")
    messages = [{"role": "user", "content": ASK}]
    reply = create(client, model, messages, False)
    message = reply.choices[0].message
    calls = message.tool_calls or []
    print(f"served: finish={reply.choices[0].finish_reason} tool_calls="
          f"{[(c.function.name, c.function.arguments) for c in calls]} content={message.content!r}")
    if not calls:
        fail(f"no tool_calls through ollm serve; content: {message.content!r}")
    if reply.choices[0].finish_reason != "tool_calls":
        fail(f"finish_reason {reply.choices[0].finish_reason!r}, not 'tool_calls'")
    if looks_like_a_text_call(message.content):
        fail(f"the call also leaked as content: {message.content!r}")
    content, streamed_calls = streamed(client, model, messages)
    want = [(c.function.name, json.loads(c.function.arguments)) for c in calls]
    got = [(c["name"], json.loads(c["arguments"] or "{}")) for c in streamed_calls]
    if got != want:
        fail(f"streamed calls {got} differ from the whole reply's {want}")
    if any(not c["id"] for c in streamed_calls):
        fail(f"a streamed call without an id: {streamed_calls}")
    if looks_like_a_text_call(content):
        fail(f"the streamed call leaked as content: {content!r}")
    answer = loop(client, model, messages, message, folder)
    return PORT in answer


def loop(client, model, messages, message, folder):
    """Runs the calls and asks again until the model answers without calls."""
    for turn in range(1, MAX_TURNS + 1):
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = read_file(folder, call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        reply = create(client, model, messages, False)
        message = reply.choices[0].message
        print(f"served, turn {turn + 1}: finish={reply.choices[0].finish_reason} "
              f"content={message.content!r} tool_calls={len(message.tool_calls or [])}")
        if not message.tool_calls:
            if not message.content:
                fail("an empty answer after the tool results")
            return message.content
    fail(f"no answer after {MAX_TURNS} rounds of tool calls")


def main():
    args = sys.argv[1:]
    no_calls = "--direct-gets-no-calls" in args
    args = [a for a in args if a != "--direct-gets-no-calls"]
    if len(args) != 3:
        fail(__doc__.strip().splitlines()[-1])
    direct_url, served_url, model = args
    with tempfile.TemporaryDirectory(prefix="ollm-openai-loop-") as tmp:
        folder = Path(tmp)
        (folder / "config.toml").write_text(f'[server]\nhost = "127.0.0.1"\nport = {PORT}\n')
        missed = direct(direct_url, model, no_calls)
        print(f"direct: the model wrote its call as text and the server missed it: {missed}")
        answered = through_serve(served_url, model, folder)
        print(f"served: the answer names port {PORT}: {answered}")
    print("openai_tool_loop: ok")


if __name__ == "__main__":
    main()
