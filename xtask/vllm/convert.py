"""Turns a GGUF model into the model folder vLLM loads, run by `cargo xtask server --engine vllm`.

vLLM's CPU path cannot run a Q4_K_M GGUF (its dequantize kernel exists only for CUDA, and
the first request kills the engine), so the weights are dequantized once, by transformers,
into bfloat16 safetensors, with the tokenizer and the model's own chat template (tool
support included) beside them.

transformers refuses to save a model that still carries its GGUF quantizer, so any left on
the model is removed first. The folder is written to OUT_DIR, which xtask then renames
into place: a folder at the final path is always complete.

Usage: python convert.py GGUF_FILE OUT_DIR
"""

import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    gguf, out = Path(sys.argv[1]), Path(sys.argv[2])
    started = time.monotonic()
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent,
        gguf_file=gguf.name,
        dtype=torch.bfloat16,
        quantization_config=GgufConfig(dequantize=True),
    )
    # Some transformers releases keep the GGUF quantizer on the model, and then refuse to
    # save it; 5.19 with `dequantize=True` keeps none.
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    if getattr(model.config, "quantization_config", None) is not None:
        del model.config.quantization_config
    model.save_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tokenizer.save_pretrained(out)
    if not (out / "chat_template.jinja").is_file():
        sys.exit(f"convert: no chat_template.jinja in {out}: the model's template was lost")
    print(f"convert: {gguf.name} -> {out} in {time.monotonic() - started:.1f}s", flush=True)


if __name__ == "__main__":
    main()
