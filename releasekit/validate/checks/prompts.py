"""Prompts of an exact token length, made from the server's own tokenizer.

Random token IDs would need the vocabulary size; sampling IDs that the tokenizer itself
produced for ordinary text works for every model and gives exactly N input tokens.
"""

from __future__ import annotations

import random

from releasekit.validate.client import EngineClient

_CORPUS = (
    "The history of computing is a story of people who wanted answers faster than they could "
    "calculate them. Tables of logarithms, mechanical adders, punched cards and valves each "
    "made some sums cheaper, and every gain created new questions worth asking. Weather, "
    "bridges, codes, orbits and markets all became problems of arithmetic at scale. 0 1 2 3 4 "
    "5 6 7 8 9 apples rivers mountains seven eleven forty green blue red yellow purple."
)


def token_pool(client: EngineClient) -> list[int]:
    pool = sorted(set(client.tokenize(_CORPUS)))
    if len(pool) < 8:
        raise RuntimeError("the tokenizer produced fewer than 8 distinct tokens for the prompt corpus")
    return pool


def random_prompts(pool: list[int], count: int, length: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.choice(pool) for _ in range(length)] for _ in range(count)]
