"""A tiny random Llama, written locally, for exercising a real engine without model downloads.

Served with ``--load-format dummy`` its weights are random, so its answers are gibberish:
it proves the pipeline (server, checks, counters, gates), not model quality. head_dim is
32 because vLLM's CPU attention does not support 16. The tokenizer is a word-level
``tokenizers`` JSON written by hand, so nothing but the standard library is needed here.
"""

from __future__ import annotations

import json
from pathlib import Path

SPECIALS = ["<unk>", "<s>", "</s>"]
_WORDS = ["the", "a", "an", "of", "to", "and", "in", "is", "it", "that", "was", "for", "on", "are", "as", "with", "his", "they", "at", "be", "this", "from", "have", "or", "by", "one", "had", "not", "but", "what", "all", "were", "when", "we", "there", "can", "your", "which", "their", "said", "if", "do", "will", "each", "about", "how", "up", "out", "them", "then", "she", "many", "some", "so", "these", "would", "other", "into", "has", "more", "her", "two", "like", "him", "see", "time", "could", "no", "make", "than", "first", "been", "its", "who", "now", "people", "my", "made", "over", "did", "down", "only", "way", "find", "use", "may", "water", "long", "little", "very", "after", "words", "called", "just", "where", "most", "know", "question", "answer", "how", "many", "much", "does", "cost", "total", "each", "has", "buys", "sells", "apples", "eggs", "dollars", "hours", "minutes", "days", "weeks", "books", "pages", "cookies", "marbles", "students", "friends", "pass", "key", "hidden", "text", "remember", "grass", "green", "sky", "blue", "sun", "yellow", "here", "we", "go", "back", "again", "find", "memorise", "count", "from", "words", "separated", "commas", "write", "multiplication", "table", "line", "repeat", "sentence", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "times", "list", "months", "year", "number", "january", "february", "march", "april", "june", "july", "august", "september", "october", "november", "december", "def", "return", "if", "else", "n", "fibonacci", "factorial", "alphabet", "letter", "position", "translate", "json", "name", "age", "city", "alice", "bob", "carol", "paris", "rome", "continue", "pattern", "red", "history", "computing", "story", "wanted", "answers", "faster", "than", "could", "calculate", "tables", "logarithms", "mechanical", "adders", "punched", "cards", "valves", "made", "sums", "cheaper", "every", "gain", "created", "new", "questions", "worth", "asking", "weather", "bridges", "codes", "orbits", "markets", "became", "problems", "arithmetic", "scale", "rivers", "mountains", "seven", "eleven", "forty", "purple", "three", "four", "five", "six", "eight", "nine", "ten", "twelve", "twenty", "thirty", "hundred", "thousand"]  # noqa: SIM905 - a word list reads better as prose
_PUNCT = list(".,:;?!'\"()[]{}=+-*/$#%<>_")


def vocabulary(size: int = 512) -> dict[str, int]:
    tokens: list[str] = []
    for t in [*SPECIALS, *_PUNCT, *(str(i) for i in range(200)), *_WORDS]:
        if t not in tokens:
            tokens.append(t)
    tokens += [f"tok{i}" for i in range(size - len(tokens))]
    return {t: i for i, t in enumerate(tokens[:size])}


def tokenizer_json(vocab: dict[str, int]) -> dict:
    added = [
        {"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for t in SPECIALS
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Lowercase"},
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"},
    }


def write_tiny_llama(directory: Path, *, vocab_size: int = 512, max_positions: int = 4096) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    vocab = vocabulary(vocab_size)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_hidden_layers": 2,
        "head_dim": 32,
        "vocab_size": vocab_size,
        "max_position_embeddings": max_positions,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "bos_token_id": vocab["<s>"],
        "eos_token_id": vocab["</s>"],
    }
    files = {
        "config.json": config,
        "generation_config.json": {"bos_token_id": vocab["<s>"], "eos_token_id": vocab["</s>"]},
        "tokenizer.json": tokenizer_json(vocab),
        "tokenizer_config.json": {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": "<s>",
            "eos_token": "</s>",
            "unk_token": "<unk>",
            "model_max_length": max_positions,
            "clean_up_tokenization_spaces": False,
        },
        "special_tokens_map.json": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    }
    for name, data in files.items():
        (directory / name).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return directory
