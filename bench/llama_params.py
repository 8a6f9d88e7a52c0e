"""What llama.cpp's own knobs change for the chat model on these cores: prompt reading and writing speed.

    ./run.sh down && .venv/bin/python bench/llama_params.py [--model qwen2.5-coder:1.5b] [--repeats 2]

Each variant loads the model in this process the way the model server does (``labkit.services.modelserver.
registry.ChatEngine``: one slot, 2 threads, sleeping threads) and changes one thing: flash attention,
a larger micro-batch, or speculative decoding with the 0.5B as draft model (same tokenizer; greedy
verification, so the answer should not change). It reads a fresh ~2,000-token prompt (a new marker each time,
so no cache helps) and writes a short answer of each kind the lab asks for: two tool calls of the news agent
and one answer from knowledge-base text. Figures are printed, nothing is asserted; stop the stack first,
or the server's own chats share the cores.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from typing import Any

import xllamacpp

from labkit.agent.planner import SYSTEM_PROMPT
from labkit.agent.tools import DEFAULT_TOOLS, tool_schema
from labkit.core.corpora.kb import KB_DOCUMENTS
from labkit.core.openmp import share_the_cpu
from labkit.services.modelserver.registry import chat_params
from labkit.services.modelserver.weights import prepare_model

VARIANTS: dict[str, dict[str, Any]] = {
    "as the lab runs it": {},
    "flash attention on": {"flash_attn_type": 1},
    "micro-batch 1024 (default 512)": {"n_ubatch": 1024},
    "draft model 0.5B (speculative)": {"draft": "qwen2.5-coder:0.5b"},
}


def engine(model: str, change: dict[str, Any]) -> xllamacpp.Server:
    """A llama.cpp server with the lab's chat parameters (``chat_params``), `change` applied."""
    params = chat_params(str(prepare_model(model)), 4096, 2)
    for name, value in change.items():
        if name == "draft":
            spec = params.speculative
            kind = type(spec.types[0])
            spec.types = [kind.COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE]
            spec.draft.mparams.path = str(prepare_model(value))
            spec.draft.cpuparams.n_threads = spec.draft.cpuparams_batch.n_threads = 2
            spec.draft.cpuparams.poll = spec.draft.cpuparams_batch.poll = 0
            params.speculative = spec
        else:
            setattr(params, name, value)
    return xllamacpp.Server(params)


def requests() -> list[dict[str, Any]]:
    """Two tool calls of the news agent and one answer from the knowledge base's text (greedy, short)."""
    tools = [tool_schema(tool) for tool in DEFAULT_TOOLS]
    asks = [{"messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}],
             "tools": tools, "max_tokens": 96} for question in ("Что пишут про цену золота?", "Сколько новостей про спорт?")]
    text = "\n\n".join(f"[документ {doc.id}]\n{doc.text[:1200]}" for doc in KB_DOCUMENTS.documents()[:3])
    asks.append({"messages": [{"role": "system", "content": "Отвечай по-русски кратко и только по фрагментам."},
                              {"role": "user", "content": f"Фрагменты:\n{text}\n\nВопрос: Можно ли вернуть наушники?"}],
                 "max_tokens": 120})
    return asks


def measure(server: xllamacpp.Server, repeats: int) -> dict[str, Any]:
    """Prompt tokens per second on fresh prompts, and writing speed and answers on cached ones."""
    long_text = "\n".join(doc.text for doc in KB_DOCUMENTS.documents()[:4])[:5200]
    read = []
    for _ in range(repeats):
        fresh = [{"role": "system", "content": f"[{uuid.uuid4().hex}] Ты помощник."}, {"role": "user", "content": long_text}]
        timings = server.handle_chat_completions({"messages": fresh, "max_tokens": 1, "temperature": 0, "stream": False})["timings"]
        read.append(timings["prompt_per_second"])
    written, seconds, answers = 0, 0.0, []
    for request in requests():
        server.handle_chat_completions(dict(request, max_tokens=1, temperature=0, stream=False))  # the prompt, cached
        reply = server.handle_chat_completions(dict(request, temperature=0, stream=False))
        written += reply["timings"]["predicted_n"]
        seconds += reply["timings"]["predicted_ms"] / 1000
        message = reply["choices"][0]["message"]
        answers.append((message.get("content") or "") + json.dumps(message.get("tool_calls") or "", ensure_ascii=False))
    return {"prompt_tok_s": sum(read) / len(read), "gen_tok_s": written / seconds, "gen_s": seconds, "answers": answers}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder:1.5b")
    parser.add_argument("--repeats", type=int, default=2, help="fresh prompts read per variant")
    args = parser.parse_args()
    share_the_cpu()
    base: list[str] | None = None
    print(f"{'variant':34} {'prompt tok/s':>12} {'write tok/s':>11} {'writing, s':>10}  answers as the lab's")
    for name, change in VARIANTS.items():
        started = time.perf_counter()
        result = measure(engine(args.model, change), args.repeats)
        base = base or result["answers"]
        same = sum(a == b for a, b in zip(result["answers"], base))
        print(f"{name:34} {result['prompt_tok_s']:12.1f} {result['gen_tok_s']:11.1f} {result['gen_s']:10.2f}  "
              f"{same} of {len(base)}   ({time.perf_counter() - started:.0f} s with the load)")


if __name__ == "__main__":
    main()
