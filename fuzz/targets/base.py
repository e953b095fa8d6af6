"""What a target adapter is: a small map from a Case onto one library call, plus what it supports
(fuzz.model.support.Support, narrowed by its release and known bugs: Target.declared).

A target belongs to a library *family* (fla, sglang, flashinfer). The family decides where the
functions come from: the installed library, or an override module (`--gdn-target fla=my.module`)
exposing the same API, which then runs on the profile's device (CPU in the CPU profiles). A module that reports a
release (`__version__`) is held to that release's contract (fuzz.targets.contract), installed or given as an override.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType

import torch

from fuzz.model.case import Case
from fuzz.model.guarded import OFFSET_BITS
from fuzz.model.known_bugs import KnownBug, known_bugs, serving_bugs
from fuzz.model.support import Support
from fuzz.model.tensors import Tensors
from fuzz.targets.contract import Contract, contract_for, runs_on
from fuzz.targets.semantics import Semantics, semantics_for

# Support fields, spread into a dataclasses.replace of a target's base Support:
# decode and verify with an intermediate buffer (a leading view of a longer one too) and disable_state_update.
VERIFYING = dict(ops=frozenset({"decode", "verify"}), intermediate=True, sliced_intermediate=True, no_update=True)
# K-major state [B, HV, K, V] passed as the batch's states: no pool, so no slot maps.
KV_STATE = dict(layouts=("kv",), pool=False, split_write=False)


class Unavailable(Exception):
    """The target cannot run here; the message says why and what would fix it."""


@dataclass(frozen=True)
class ReleasePlan:
    """What a loaded API (the installed release or an override module) lets a target do, read from the API itself
    (its signatures, availability flags) once per API (Target.release_plan): the Support fields it narrows, with
    their limits (Support.narrowed), or why the target cannot run on it at all (then the narrowing does not matter)."""

    narrowing: Mapping[str, object] = field(default_factory=dict, hash=False)
    unavailable: str | None = None


@dataclass
class Family:
    """Where a library's API comes from. `load_real` imports the installed library."""

    name: str
    functions: tuple[str, ...]
    override: str | None = None  # "module.path" or "module.path:attribute"
    # wraps the loaded API where the adapters look their functions up (fuzz.export.call.tapping: a recording proxy)
    tap: Callable[[object], object] | None = field(default=None, repr=False)
    _api: object = field(default=None, repr=False)
    _error: str | None = field(default=None, repr=False)

    def api(self):
        if self._api is None and self._error is None:
            try:
                self._api = self._load()
            except Unavailable as e:
                self._error = str(e)
        if self._error:
            raise Unavailable(self._error)
        return self.tapped(self._api)

    def tapped(self, api):
        """`api` as the adapters see it: through `tap` while one is set."""
        return api if self.tap is None else self.tap(api)

    def version(self) -> str | None:
        api = self.api()
        return getattr(api, "__version__", None)

    def _load(self):
        if self.override:
            modname, _, attr = self.override.partition(":")
            try:
                api = importlib.import_module(modname)
            except ImportError as e:
                raise Unavailable(f"override {self.override}: {e}") from e
            api = getattr(api, attr) if attr else api
            if not any(hasattr(api, f) for f in self.functions):
                raise Unavailable(f"override {self.override} has none of {', '.join(self.functions)}")
            return api
        return self.load_real()

    def load_real(self):
        raise NotImplementedError

    def reset(self, override: str | None) -> None:
        self.override, self._api, self._error = override, None, None


@contextmanager
def unavailable_as(error: type[Exception]) -> Iterator[None]:
    """A wheel loader's `error` raised inside (fuzz.targets.wheel_import.WheelUnavailable: its `reason` says what to
    install) becomes Unavailable, which Family.api keeps as the family's reason."""
    try:
        yield
    except error as e:
        raise Unavailable(e.reason) from e


def installed_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError as e:
        raise Unavailable(f"{dist} is not installed") from e


def import_or_unavailable(module: str, hint: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except Exception as e:  # any import failure makes the target unavailable, with its text
        raise Unavailable(f"import {module} failed ({type(e).__name__}: {e}); {hint}") from e


class Target:
    """Subclasses set name, family, path, support and implement call()."""

    name: str
    family: Family
    path: str  # key into the semantics table
    support: Support
    needs: tuple[str, ...]  # the family functions this target calls
    # the library module whose functions `needs` names, where the adapter's API object is not that module itself
    # (None: each function's own __module__ names it)
    library_module: str | None = None
    contracts: tuple[Contract, ...] = ()  # the family's release contracts (fuzz.targets.contract)
    # False for a pair's partner (Target.paired) that stands only as the other side of the comparison, not under
    # test itself (vLLM's sigmoid gating + RMSNorm against its MTP port; vllm-sigmoid judges that kernel)
    oracle_judged: bool = True

    def __str__(self) -> str:
        return self.name

    @property
    def overridden(self) -> bool:
        return self.family.override is not None

    def declared(self, bugs: tuple[KnownBug, ...] = ()) -> Support:
        """Support as the strategies see it: the adapter's own, within the contract of the release the loaded API
        reports (an override module that reports none has no hardware limits of its own; a CPU stand-in keeps the
        release's shape preconditions but not its device requirement), narrowed by what the loaded API can do
        (release_plan); each known bug given narrows what is drawn (its mask)."""
        sup = self.support
        if self.overridden:
            sup = dataclasses.replace(sup, head_dims=None, heads=None, arch=())
        try:
            contract, plan = self.contract(), self.release_plan()
        except Unavailable:
            contract, plan = None, ReleasePlan()
        if contract is not None:
            sup = contract.applied(sup, runs_on(self.api()))
        if not plan.unavailable:  # else nothing runs (unavailable_reason says why)
            sup = sup.narrowed(**plan.narrowing)
        for bug in bugs:
            sup = sup.narrowed(**bug.mask)
        return sup

    def contract(self) -> Contract | None:
        """The contract row of the release the loaded API reports (None: it reports none, or no row is written for
        it: then only Support limits the target)."""
        return contract_for(self.contracts, self.path, self.release())

    def semantics(self) -> Semantics:
        return semantics_for(self.path, self.release())

    def release_support(self, api) -> ReleasePlan:
        """What `api` (the installed release or an override module) lets this target do, read from the API itself;
        called once per loaded API (see release_plan). Default: nothing narrowed."""
        return ReleasePlan()

    def release_plan(self) -> ReleasePlan:
        """release_support of the API loaded now, computed once per loaded API (the strategies ask per example)."""
        api = self.api()
        memo = self.__dict__.get("_release_memo")
        if memo is None or memo[0] is not api:
            memo = self._release_memo = (api, self.release_support(api))
        return memo[1]

    def release(self) -> str | None:
        """The library release the loaded API reports (its `__version__`): the installed release, or the one an
        override module says it is; None for a module that reports none. Semantics rows, known bugs, routing and the
        contract all follow it."""
        return self.family.version()

    def beneath(self, profile_device: str) -> dict[str, tuple[str, str]]:
        """What the target's library calls beneath it under a profile on this device, per operation: (the semantics
        path that library's known bugs are recorded on, its release). Triage names those bugs too (the run report's
        TargetRow.beneath). None here: a target calls its library directly."""
        return {}

    def known_bugs(self, policy: str = "release") -> tuple[KnownBug, ...]:
        """The known bugs whose masks apply here under a mask policy (fuzz.model.known_bugs)."""
        return known_bugs(self.path, self.release(), policy)

    def serving_bugs(self, policy: str = "release") -> tuple[KnownBug, ...]:
        """The known bugs whose masks a serving sequence draws with (fuzz.model.known_bugs.serving_bugs)."""
        return serving_bugs(self.path, self.release(), policy)

    def api(self):
        """What this target's `needs` are looked up on (the family's API unless a target loads more)."""
        return self.family.api()

    def offset_bits(self) -> int:
        """The integer width the kernels' element offsets may wrap at: 32 (the int32 overflow class), unless the
        loaded API declares OFFSET_BITS (a CPU stand-in modelling the class at a width a CPU can allocate)."""
        try:
            return int(getattr(self.api(), "OFFSET_BITS", OFFSET_BITS))
        except (Unavailable, NotImplementedError):  # nothing loaded: the library's own width
            return OFFSET_BITS

    def unavailable_reason(self, profile_device: str) -> str | None:
        """None when the target can run on this profile's device, else why not: the API cannot load, lacks a function
        or a keyword this target needs, its release has no semantics row, or the device is not one the release's
        contract (or the Support) names."""
        try:
            api = self.api()
        except Unavailable as e:
            return str(e)
        missing = [f for f in self.needs if not hasattr(api, f)]
        if missing:
            return f"{self.family.override or self.family.name} lacks {', '.join(missing)}"
        try:  # what the loaded release cannot do (a missing essential keyword, a kernel that failed to import) ...
            if reason := self.release_plan().unavailable:
                return reason
            self.semantics()  # ... before what is not modelled for it
        except (Unavailable, LookupError) as e:  # LookupError: no semantics row for the reported release
            return str(e)
        if arch := self.declared().arch:
            if profile_device != "cuda" or not torch.cuda.is_available():
                return f"needs a CUDA GPU, compute capability {arch}; device here: {profile_device}"
            major = torch.cuda.get_device_capability()[0]
            if major not in arch:
                return f"needs compute capability major in {arch}; this GPU is sm_{major}x"
        return None

    def op_unavailable(self, op: str, profile_device: str) -> str | None:
        """Why this target, available here, cannot run `op` on this profile's device, or None."""
        return None

    def where(self, profile_device: str) -> str | None:
        """Where the library runs on this profile's device, for the targets table, where the origin does not say it
        (a CPU stand-in, an interpreter); None: it runs where it is installed."""
        return None

    def paired(self) -> Target | None:
        """A second target each case of this one also runs on, in the same check: judged against the oracle, then
        against this target where both contracts define the values (a differential inside one engine:
        fuzz.judge.pair); None: none."""
        return None

    def variant(self, case: Case) -> str | None:
        """The kernel variant the library dispatches this case to, where it picks one by more than the compile key
        (e.g. by B * HV); part of the case's dispatch bucket."""
        return None

    def call(self, case: Case, t: Tensors) -> torch.Tensor:
        """Run the library on the case; write pool / intermediate in place; return the output tensor."""
        raise NotImplementedError
