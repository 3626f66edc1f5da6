"""How long a fuzz test runs and from which seed: bounded and fixed by default, so that CI explores
the same inputs every run; `<PREFIX>_SECONDS=600 <PREFIX>_SEED=random` for a soak with new ones
(the seed is printed; `<PREFIX>_SEED=N` replays one)."""

import os
import random


def fuzz_budget(prefix: str, default_seconds: float) -> tuple[float, int]:
    seconds = float(os.environ.get(f"{prefix}_SECONDS", str(default_seconds)))
    seed = os.environ.get(f"{prefix}_SEED", "1")
    return seconds, random.randrange(2**32) if seed == "random" else int(seed)
