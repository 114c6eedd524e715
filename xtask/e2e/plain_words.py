"""Tool tasks asked in plain words, through a plain `openai` client loop: a measurement.

Each task is a question whose answer is only in a file of a small project folder; the
client offers `read_file` and `list_dir`, runs the calls it gets, and counts the task done
when the final answer holds the expected fact. Run it once against the server directly
and once against `ollm serve` in front of it, at temperature 0 and at the server's own
sampling, to compare; nothing is asserted (docs/vllm.md has the figures).

Usage: python plain_words.py BASE_URL MODEL [REPEATS]
"""

import json
import sys
import tempfile
from pathlib import Path

from openai import OpenAI

FILES = {
    "README.md": "# tally\n\nA tiny counting service that stores its counts in SQLite.\n",
    "config.toml": '[server]\nhost = "127.0.0.1"\nport = 8123\nworkers = 4\n',
    "CHANGELOG.md": "# Changelog\n\n## 0.4.2\n- Counts survive a restart.\n",
}
TASKS = [
    ("Which port does config.toml set?", "8123"),
    ("How many workers does the server run?", "4"),
    ("What database does this project store its counts in?", "SQLite"),
    ("What is the latest version in the changelog?", "0.4.2"),
    ("What host does the server listen on?", "127.0.0.1"),
]
TOOLS = [
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a text file in the project folder.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                       "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "list_dir", "description": "List the files of the project folder.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}},
]
MAX_TURNS = 5


def run_tool(folder, call):
    try:
        args = json.loads(call.function.arguments or "{}")
    except ValueError:
        return "Error: the arguments are not JSON"
    if call.function.name == "list_dir":
        return "\n".join(sorted(FILES))
    if call.function.name == "read_file":
        name = Path(str(args.get("path", ""))).name
        path = folder / name
        return path.read_text() if path.is_file() else f"Error: no file {name}"
    return f"Error: no tool {call.function.name}"


def task(client, model, folder, question, temperature):
    """(done, calls run, turns) for one task."""
    messages = [{"role": "user", "content": question[0]}]
    calls = 0
    for turn in range(1, MAX_TURNS + 1):
        extra = {} if temperature is None else {"temperature": temperature}
        reply = client.chat.completions.create(
            model=model, messages=messages, tools=TOOLS, max_tokens=256, **extra)
        message = reply.choices[0].message
        if not message.tool_calls:
            return question[1] in (message.content or "") and calls > 0, calls, turn
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            calls += 1
            messages.append({"role": "tool", "tool_call_id": call.id,
                             "content": run_tool(folder, call)})
    return False, calls, MAX_TURNS


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__.strip().splitlines()[-1])
    base_url, model = sys.argv[1:3]
    repeats = int(sys.argv[3]) if len(sys.argv) == 4 else 1
    client = OpenAI(base_url=base_url, api_key="unused", timeout=300)
    with tempfile.TemporaryDirectory(prefix="ollm-plain-words-") as tmp:
        folder = Path(tmp)
        for name, text in FILES.items():
            (folder / name).write_text(text)
        for label, temperature in (("temperature 0", 0), ("server's sampling", None)):
            runs = 1 if temperature == 0 else repeats
            done = 0
            for question in TASKS:
                for _ in range(runs):
                    ok, calls, turns = task(client, model, folder, question, temperature)
                    done += ok
                    print(f"{label}: {question[0]!r}: done={ok} calls={calls} turns={turns}")
            print(f"{label}: {done}/{len(TASKS) * runs} tasks done")


if __name__ == "__main__":
    main()
