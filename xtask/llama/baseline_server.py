"""llama-server's command line for the embedded server of the `xllamacpp` wheel.

xtask installs this file as `llama-server` beside the wheel's `xllamacpp/` package (its
first line then names the venv's Python), so that the baseline prebuilt server runs as
any other llama-server: the same flags, HTTP endpoints and log. Only the flags xtask
passes are read; any other is an error, so a new flag cannot be silently ignored.

Usage: llama-server --version
       llama-server --host H --port P -m GGUF [--alias A] [--jinja] [-c N] [-np N]
                    [--temp T] [--no-webui]
"""

import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import xllamacpp  # noqa: E402  (the path above first)

# The llama.cpp build number, from the pinned wheel's version (its own build info says 0).
LLAMA_CPP_BUILD = "11549"


def version():
    info = xllamacpp.BUILD_INFO
    print(
        f"version: {LLAMA_CPP_BUILD} (xllamacpp {xllamacpp.__version__})\n"
        f"built with {info['compiler']} for {info['build_target']}"
    )


def parse(argv):
    """CommonParams from llama-server's flags."""
    params = xllamacpp.CommonParams()
    params.endpoint_metrics = False
    args = iter(argv)
    for flag in args:
        if flag == "--jinja":
            params.use_jinja = True
        elif flag == "--no-webui":
            params.ui = False
        elif flag in VALUED:
            VALUED[flag](params, next(args, None) or sys.exit(f"{flag} needs a value"))
        else:
            sys.exit(f"llama-server (xllamacpp): unknown flag {flag}")
    if not params.model.path:
        sys.exit("llama-server (xllamacpp): -m is required")
    return params


def set_model(params, value):
    params.model.path = value


def set_temp(params, value):
    params.sampling.temp = float(value)


VALUED = {
    "--host": lambda p, v: setattr(p, "hostnames", [v]),
    "--port": lambda p, v: setattr(p, "port", int(v)),
    "-m": set_model,
    "--alias": lambda p, v: setattr(p, "model_alias", {v}),
    "-c": lambda p, v: setattr(p, "n_ctx", int(v)),
    "-np": lambda p, v: setattr(p, "n_parallel", int(v)),
    "--temp": set_temp,
}


def main():
    if sys.argv[1:] == ["--version"]:
        version()
        return
    server = xllamacpp.Server(parse(sys.argv[1:]))
    print(f"xllamacpp: serving on {server.listening_address}", flush=True)
    # The server runs on its own threads; this one waits until the process is stopped
    # (SIGTERM's default action ends it).
    threading.Event().wait()


if __name__ == "__main__":
    main()
