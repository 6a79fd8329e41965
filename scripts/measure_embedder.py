"""Print the default embedder's speed on this machine (synthetic English text, fixed seed).

    python scripts/measure_embedder.py [--turns 1000] [--sessions 20] [--queries 30]

Measures: turns/s on ~27-word chat turns; word pieces/s on ~2,000-word sessions split to the
model's window; single-query latency (p50, p90). Numbers are indicative on shared machines.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before any native runtime loads

import argparse
import random
import time

import numpy as np

from memgas.embed.factory import get_embedder

WORDS = (
    "i you we they it my your our the a an and but or so because if when then also just really very "
    "was is are be been have had do did will would can could should went got made took saw said told "
    "think know want need like love hate feel try start stop keep remember forget plan book visit call "
    "today yesterday tomorrow week month year morning evening weekend last next ago later soon again "
    "sister brother mom dad friend boss colleague doctor neighbour dog cat kids wife husband team "
    "wedding trip flight hotel beach museum concert party dinner lunch coffee recipe garden piano yoga "
    "job project meeting deadline budget salary apartment car bike phone laptop router movie book "
    "lisbon paris tokyo chicago kitchen office park lake mountain city new old big small good great "
    "tired happy busy expensive cheap early late first second three five twenty hundred"
).split()


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + rng.choice(".?!")


def turn(rng: random.Random) -> str:
    """~27 words in two or three sentences."""
    parts, left = [], rng.randint(20, 34)
    while left > 0:
        k = min(left, rng.randint(6, 14))
        parts.append(sentence(rng, k))
        left -= k
    return " ".join(parts)


def session(rng: random.Random, n_words: int = 2000) -> str:
    """User/assistant lines of chat totalling about ``n_words`` words."""
    lines, written = [], 0
    while written < n_words:
        t = turn(rng)
        lines.append(f"{rng.choice(['user', 'assistant'])}: {t}")
        written += len(t.split())
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--queries", type=int, default=30)
    args = ap.parse_args()
    rng = random.Random(0)

    t0 = time.perf_counter()
    emb = get_embedder()
    emb.embed(["warm up"])
    print(f"embedder  {emb.id}  dim={emb.dim}  window={emb.max_tokens}  cpus={os.cpu_count()}")
    print(f"load      {time.perf_counter() - t0:.2f} s")

    turns = [turn(rng) for _ in range(args.turns)]
    n_tok = sum(emb.count_tokens(turns))
    t0 = time.perf_counter()
    emb.embed(turns)
    dt = time.perf_counter() - t0
    print(f"turns     {len(turns) / dt:,.0f} turns/s  ({len(turns)} turns, "
          f"{np.mean([len(t.split()) for t in turns]):.1f} words, {n_tok / len(turns):.1f} word pieces each; "
          f"{n_tok / dt:,.0f} word pieces/s)")

    sessions = [session(rng) for _ in range(args.sessions)]
    t0 = time.perf_counter()
    pieces = [p for s in sessions for p in emb.split_to_window(s)]
    t_split = time.perf_counter() - t0
    n_tok = sum(emb.count_tokens(pieces))
    t0 = time.perf_counter()
    emb.embed(pieces)
    dt = time.perf_counter() - t0
    print(f"sessions  {n_tok / dt:,.0f} word pieces/s  = {len(sessions) / (dt + t_split):.2f} sessions/s "
          f"({len(sessions)} x ~2,000 words -> {len(pieces)} pieces of <= {emb.max_tokens} tokens, "
          f"{n_tok / len(pieces):.0f} word pieces each; splitting took {t_split * 1e3:.0f} ms)")

    queries = [turn(rng)[:80] for _ in range(args.queries)]
    lat = []
    for q in queries:
        t0 = time.perf_counter()
        emb.embed([q])
        lat.append(time.perf_counter() - t0)
    print(f"query     p50 {np.median(lat) * 1e3:.1f} ms, p90 {np.percentile(lat, 90) * 1e3:.1f} ms "
          f"({len(queries)} single-query calls)")


if __name__ == "__main__":
    main()
