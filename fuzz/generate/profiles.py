"""Profiles: the one thing a user chooses. Each is one record (`Profile`) in one table (`PROFILES`): its device and
search budget, its time bound, its examples and example database; the Hypothesis profiles, the plugin's bound and the
commands' --profile choices all read it there."""

from __future__ import annotations

import dataclasses
import functools
import os
import subprocess
from dataclasses import dataclass
from types import MappingProxyType

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase, MultiplexedDatabase

CPU_LARGE_BYTES = 1 << 30  # a CPU run's large cases: stand-ins that declare a small OFFSET_BITS fit, real pools do not
GPU_RESERVE = 0.15  # of a GPU's free memory, left to the run's other processes (contexts, caches, their checks)


@dataclass(frozen=True)
class Budget:
    """What the strategies may draw on this profile's machine."""

    device: str
    head_dims: tuple  # (K, V) pairs; K != V pairs first, so a transposed state cannot pass
    max_B: int
    max_T: int
    max_pool: int
    # The most device memory one large-pool case (slot offsets past 2^31 elements, a 2^31-element guard below the
    # pool: the int32 offset overflow class, fuzz/test_large_pool.py) may take; None: the device's free memory, read
    # when the run starts (device_bytes). A large case that does not fit is not drawn.
    large_bytes: int | None = CPU_LARGE_BYTES
    # Compile-key choices. Every new (T, heads, dims, scale, flags, dtypes, strides) costs a 1.5-4 s CuTe
    # compile on a GPU, while B, slot maps, padding and values are free: GPU budgets keep these sets small
    # so a campaign spends its examples inside compiled buckets.
    t_choices: tuple = (1, 2, 3, 4, 5, 6, 8, 12, 16)
    scales: tuple = (None, 1.0, 0.25)
    gaps: tuple = (0, 1, 3)
    # Now and then a case first runs unjudged on a larger pool (Case.warm_pool): compile caches keyed without the
    # pool's capacity then serve the judged call a stale kernel, deterministically. GPU only: compiled kernels.
    warm_calls: bool = False
    # Compile buckets (fuzz.generate.strategies.bucket_plan): plan_size > 0 draws buckets from a fixed plan of that
    # many per target and operation, and one case in open_every from the whole bucket space; plan_seed picks the plan.
    plan_size: int = 0
    open_every: int = 16
    plan_seed: int = 0
    # The threshold plan (fuzz.generate.threshold_plan): each fuzz test first checks at most this many cases on both
    # sides of its release's dispatch thresholds. A CPU's are the kernel thresholds at the fewest tokens, about.
    threshold_cases: int = 8
    # While a warm-up compiles the plan beside the run (fuzz.run.warming): the reprs of the planned buckets compiled
    # so far, which a planned draw keeps to (where there is any); None: the whole plan.
    compiled: frozenset | None = None
    # CPU budgets: a case whose K or V reaches heavy_dim (a release's K = V = 128, which its contract holds a CPU
    # stand-in to) costs 10-30x one at the CPU dims (its pool, buffers and their seeded values grow with K * V), so it
    # draws at most heavy_B requests, heavy_pool spare slots and heavy_T tokens, and straddles no dispatch threshold
    # past heavy_B (for_dims). None: no cap (GPU budgets).
    heavy_dim: int | None = None
    heavy_B: int = 2
    heavy_pool: int = 4
    heavy_T: int = 4

    def for_dims(self, K: int, V: int) -> Budget:
        """The budget for a case of head dims K, V: capped where they are heavy on this budget's machine."""
        if self.heavy_dim is None or max(K, V) < self.heavy_dim:
            return self
        return dataclasses.replace(
            self,
            max_B=min(self.max_B, self.heavy_B),
            max_pool=min(self.max_pool, self.heavy_pool),
            max_T=min(self.max_T, self.heavy_T),
        )


CPU_DIMS = ((8, 16), (16, 8), (4, 8), (8, 8), (16, 16))
GPU_DIMS = ((128, 128), (64, 128), (128, 64), (128, 256), (32, 32))
LOCAL_DB = ".hypothesis/gdn-examples"
_SLOW = (HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much)


@dataclass(frozen=True)
class Profile:
    """One gdn-fuzz profile, whatever reads it: the budget the strategies draw within, each fuzz test's time bound,
    its examples and whether it keeps an example database (the Hypothesis profile of its name, `register_profiles`)."""

    name: str
    budget: Budget
    # Each fuzz test's bound when --gdn-test-seconds is not given: no test runs, or shrinks, without one (a CPU gate
    # once spent five silent minutes shrinking one serving failure). Far above what a test of the profile's example
    # budget takes where nothing goes wrong.
    time_box: float
    examples: int  # per fuzz test (--gdn-examples overrides them)
    # Exploring profiles keep the local directory database (--gdn-db replaces it); ci replays the same cases every run
    # (fuzz.suite.session seeds each round from the test id, or from --hypothesis-seed) and keeps none.
    database: bool
    formerly: tuple[str, ...] = ()  # names it had, which a run naming them is told of

    @property
    def device(self) -> str:
        return self.budget.device

    def register(self) -> None:
        """This profile's Hypothesis settings, on Hypothesis's own default, never on the profile it loads when $CI is
        set (that one derandomizes, which HypoFuzz refuses, and would make a run differ between a laptop and a CI
        box)."""
        settings.register_profile(
            self.name,
            parent=settings.get_profile("default"),
            max_examples=self.examples,
            database=DirectoryBasedExampleDatabase(LOCAL_DB) if self.database else None,
            deadline=None,
            suppress_health_check=_SLOW,
            print_blob=True,
        )


GPU_BUDGET = Budget(
    "cuda",
    GPU_DIMS,
    max_B=96,
    max_T=12,
    max_pool=512,
    large_bytes=None,
    t_choices=(1, 2, 4, 6, 8, 12),
    scales=(None,),
    gaps=(0, 1),
    warm_calls=True,
    plan_size=8,
    open_every=32,
    threshold_cases=32,
)
CI_BUDGET = Budget("cpu", CPU_DIMS, max_B=4, max_T=8, max_pool=12, heavy_dim=64)
DEV_BUDGET = Budget("cpu", CPU_DIMS, max_B=6, max_T=16, max_pool=24, heavy_dim=64, heavy_B=3, heavy_pool=6, heavy_T=6)
PROFILES = MappingProxyType(
    {
        p.name: p
        for p in (
            # ci's twin "gate" (a 300 s bound, no database) was removed: "gate" is the command alone
            Profile("ci", CI_BUDGET, time_box=300.0, examples=200, database=False, formerly=("gate",)),
            Profile("dev", DEV_BUDGET, time_box=600.0, examples=300, database=True),
            Profile("h200", GPU_BUDGET, time_box=600.0, examples=5000, database=True),
            Profile("b200", GPU_BUDGET, time_box=600.0, examples=5000, database=True),
        )
    }
)
BUDGETS = MappingProxyType({name: p.budget for name, p in PROFILES.items()})  # the strategies' view, by name


def unknown_profile(name: str) -> str:
    """Why `name` is refused, in one line saying which profiles there are (the caller names its option)."""
    now = "".join(f" (the {name} profile is now {p.name})" for p in PROFILES.values() if name in p.formerly)
    return f"not a gdn-fuzz profile; expected one of {', '.join(PROFILES)}{now}"


def register_profiles() -> None:
    """Every gdn-fuzz profile, as a Hypothesis profile of its name."""
    for profile in PROFILES.values():
        profile.register()


def stable_draws() -> None:
    """One seed, one case stream, in every process. Hypothesis (6.131 on) mixes into its draws the constants it reads
    from the source of every local module imported so far (hypothesis.internal.conjecture.providers), so the cases a
    seed drew depended on what else the process had imported: a fuzz test run alone drew other cases than after other
    tests, and the two sides of a gate drew different cases when one side's library was importable from a local path.
    gdn-fuzz's seeds and coordinates must name one case stream, so the local constants are left out (Hypothesis's
    global ones, such as 0, 1, -1 and powers of two, stay). Idempotent; tests/generate/test_strategies.py holds it."""
    from hypothesis.internal.conjecture import providers

    if hasattr(providers, "_get_local_constants"):  # absent before Hypothesis 6.131: nothing to leave out
        none = providers.Constants()
        providers._get_local_constants = lambda: none


@functools.cache  # one database object per spec: Hypothesis (and HypoFuzz) compare databases by identity
def database(spec: str):
    """--gdn-db: a directory, or redis://host:port[/db] for an example database shared across hosts (failures found
    on one host replay on every other), kept beside the local directory."""
    if not spec.startswith(("redis://", "rediss://", "unix://")):
        return DirectoryBasedExampleDatabase(spec)
    try:
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase
    except ImportError as e:
        raise ValueError(f"--gdn-db {spec}: needs the redis client (pip install 'gdn-fuzz[redis]'): {e}") from e
    client = redis.Redis.from_url(spec)
    try:
        client.ping()
    except redis.RedisError as e:
        raise ValueError(f"--gdn-db {spec}: no redis server answers there ({e})") from e
    return MultiplexedDatabase(
        DirectoryBasedExampleDatabase(LOCAL_DB), RedisExampleDatabase(client, key_prefix=b"gdn-fuzz:")
    )


def sized(budget: Budget) -> Budget:
    """The budget with large_bytes read off this process's device where the profile leaves it to the device."""
    if budget.large_bytes is not None:
        return budget
    return dataclasses.replace(budget, large_bytes=int(device_bytes() * (1 - GPU_RESERVE)))


def device_bytes() -> int:
    """Free memory of the first GPU this process sees, from nvidia-smi (no CUDA context in this process: under
    --gdn-isolate only the workers need one), else from torch; 0 without a GPU."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip() or "0"
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.free", "--format=csv,noheader,nounits", "-i", visible],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        return int(out.split()[0]) << 20
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        import torch

        return torch.cuda.mem_get_info()[0] if torch.cuda.is_available() else 0
