"""Two llama-server replicas behind `ollm serve`; one is killed during 20 requests.

Run by `cargo xtask e2e`. 20 requests (every other one streamed), four at a time,
through the official `openai` package; after the fourth reply, the replica whose process
id is given is killed (SIGKILL). What must hold:
- every request completes: a reply with a finish reason and text, after at most the
  retries a client makes (the package's own for whole replies; one more attempt for a
  stream that raised);
- no partial answer passes as whole: a stream that ends without a finish reason and
  without raising fails the run (a reply cut on the killed replica must raise).

Usage: python two_replicas.py SERVED_BASE_URL MODEL PID_TO_KILL
"""

import os
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from openai import APIError, OpenAI

REQUESTS = 20
KILL_AFTER = 4


def fail(message):
    print(f"two_replicas: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


class Run:
    def __init__(self, base_url, model, pid):
        self.client = OpenAI(base_url=base_url, api_key="unused", max_retries=3, timeout=120)
        self.model, self.pid = model, pid
        self.lock = threading.Lock()
        self.done, self.killed, self.raised = 0, False, 0

    def ask(self, i):
        messages = [{"role": "user", "content": f"Write the number {i + 1} in words, nothing else."}]
        common = dict(model=self.model, messages=messages, temperature=0, max_tokens=16)
        for attempt in range(3):
            try:
                if i % 2 == 0:
                    text, finish = self.streamed(common)
                else:
                    reply = self.client.chat.completions.create(**common)
                    text, finish = reply.choices[0].message.content or "", reply.choices[0].finish_reason
                break
            except APIError as e:
                with self.lock:
                    self.raised += 1
                print(f"request {i}: attempt {attempt + 1} raised {type(e).__name__}: {e}")
        else:
            fail(f"request {i} did not complete in 3 attempts")
        if finish is None:
            fail(f"request {i}: a reply without a finish reason passed as whole: {text!r}")
        if not text.strip():
            fail(f"request {i}: an empty answer ({finish})")
        self.finished(i, text, finish)

    def streamed(self, common):
        text, finish = "", None
        for chunk in self.client.chat.completions.create(stream=True, **common):
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
        return text, finish

    def finished(self, i, text, finish):
        with self.lock:
            self.done += 1
            print(f"request {i}: {finish} {text.strip()!r}")
            if self.done == KILL_AFTER and not self.killed:
                self.killed = True
                os.kill(self.pid, signal.SIGKILL)
                print(f"killed replica pid {self.pid}")


def main():
    if len(sys.argv) != 4:
        fail(__doc__.strip().splitlines()[-1])
    run = Run(sys.argv[1], sys.argv[2], int(sys.argv[3]))
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(run.ask, range(REQUESTS)))
    if not run.killed:
        fail("the replica was never killed")
    print(f"two_replicas: ok: {run.done}/{REQUESTS} completed, {run.raised} attempts raised and were retried")


if __name__ == "__main__":
    main()
