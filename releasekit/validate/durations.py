"""Assumed wall times of the seed-003 matrix cells, for scheduling figures (not measurements).

Seed 003 gives no timings. These are planning assumptions, stated once so the benchmark
and the test use the same numbers: loading a GLM-5.2 or DeepSeek-V4 checkpoint and
capturing CUDA graphs takes most of a cell; DS4 cells add a long-context check and a
five-level throughput sweep; the A8 capture cell only starts and scans the log.
"""

from __future__ import annotations

MINUTE = 60.0

SEED_003_ASSUMED_S: dict[str, float] = {
    "glm52-tp8-dcp1-mtp0": 35 * MINUTE,
    "glm52-tp8-dcp1-mtp3": 45 * MINUTE,  # three decode runs for the gate
    "glm52-tp6-dcp2-mtp3-a4": 35 * MINUTE,
    "glm52-tp6-dcp2-mtp3-a16": 35 * MINUTE,
    "glm52-tp6-dcp2-mtp3-online-quant": 40 * MINUTE,
    "glm52-tp6-dcp2-mtp3-nvfp4-kv": 35 * MINUTE,
    "glm52-tp6-dcp2-mtp3-nf3-hybrid": 35 * MINUTE,
    "ds4-tp2-mtp0": 50 * MINUTE,
    "ds4-tp2-mtp2": 50 * MINUTE,
    "ds4-tp2-dspark": 50 * MINUTE,
    "ds4-tp4-mtp0": 40 * MINUTE,
    "ds4-tp4-mtp2": 40 * MINUTE,
    "ds4-tp4-dspark": 40 * MINUTE,
    "a8-w4a8-aux-streams-capture": 20 * MINUTE,
}
