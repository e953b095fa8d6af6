"""A case, a target's call, its release and its contract in words: the top of an exported script, an upstream issue."""

from __future__ import annotations

from fuzz.model.case import Case
from fuzz.model.regimes import GATE_REGIMES
from fuzz.run import corpus
from fuzz.targets.base import Target
from fuzz.targets.semantics import Semantics, semantics_for

DISTRIBUTIONS = {"fla": "fla-core", "sglang": "sglang", "flashinfer": "flashinfer-python", "vllm": "vllm"}
_INSTALL = {
    "fla": "pip install triton fla-core=={}",
    "sglang": "pip install triton packaging && pip install --no-deps sglang=={}",
    "flashinfer": "pip install packaging flashinfer-python=={}",
    "vllm": "pip install triton einops && pip install --no-deps vllm=={}",
}
_READ = {  # reference.contracts.PadContract.read
    "skip_zero": "is skipped (no state read or write) and its output row written as zeros",
    "skip_untouched": "is skipped (no state read or write) and its output row left as the caller had it",
    "slot0": "reads and writes back slot 0 (a sacrificial slot); its output row is undefined",
    "zero_state": "runs from a zero state (its output is defined) and stores nothing unless a write slot says where",
    "discard": "reads and writes no live slot; its output and intermediate rows are undefined (the engine discards "
    "them)",
}
_WRITE = {"skip": "skips the store", "slot0": "stores to slot 0"}
_INDEX = {"i32": "int32", "i64": "int64"}


def distribution(target: Target) -> str:
    return DISTRIBUTIONS[target.family.name]


def release_of(target: Target, entry: corpus.Entry | None, env: dict) -> str | None:
    """The library release the case is about: the entry's pinned one, else the environment's."""
    pinned = [s.version for s in (entry.versions if entry else ()) if s.operator == "=="]
    return pinned[0] if pinned else env.get(distribution(target))


def contract_row(target: Target, entry: corpus.Entry | None, env: dict) -> Semantics:
    """The semantics row of that release (the path's newest where it has none, or none is known)."""
    try:
        return semantics_for(target.path, release_of(target, entry, env))
    except LookupError:
        return semantics_for(target.path, None)


def install_command(target: Target, version: str | None) -> str:
    command = _INSTALL[target.family.name].format(version or "VERSION")
    return command if version else command.replace("==VERSION", "")


def call(target: Target, override: str | None) -> str:
    """The library functions the adapter calls: 'gated_delta_rule_decode of flashinfer-python, backend="cake_gdn"'
    (a backend other than the library's own kernels is pinned by the target)."""
    where = f"override module {override}" if override else distribution(target)
    backend = getattr(target, "backend", "flashinfer")
    return " then ".join(target.needs) + f" of {where}" + (f', backend="{backend}"' if backend != "flashinfer" else "")


def contract(target: Target, sem: Semantics, case: Case) -> str:
    """What the check holds the call to: the general contract, the semantics row's reason, and the padding contract
    where the case pads a slot."""
    if not case.valid:
        return "HV must be a multiple of H (each q/k head serves HV / H value heads): the call must reject the input."
    text = (
        "The output, the states written to the pool and the intermediate states equal the float64 gated delta "
        "rule (gdn-fuzz reference/) within the tolerance rule; whatever the contract leaves alone (other slots and "
        "rows, the bytes around each buffer) keeps its bits."
    )
    if sem.why:
        text += f" This path: {sem.why.rstrip('.')}."
    pad = sem.pad
    padded_write = case.write_slots is not None and any(pad.is_pad(w) for w in case.write_slots)
    if target.support.pool and (any(pad.is_pad(r) for r in case.read_slots) or padded_write):
        sentinel = "index < 0" if pad.sentinel == "negative" else "index <= 0"
        text += f" Padding ({sentinel}): a padded read slot's request {_READ[pad.read]}"
        text += f"; a padded write slot {_WRITE[pad.write]}." if padded_write else "."
    return text


def case_lines(case: Case) -> list[tuple[str, str]]:
    """(what, in words) for every field of the case that matters to the call."""
    padding = "index < 0" if case.null < 0 else "index <= 0"
    lines = [
        ("operation", _operation(case)),
        ("heads", _heads(case)),
        ("head dims", f"K={case.K} (q, k), V={case.V} (v)"),
        (
            "dtypes",
            f"q, k, v, a, b {case.input_dtype}; state {case.state_dtype}; slot indices {_INDEX[case.index_dtype]}",
        ),
        (
            "pool",
            f"{case.pool} slots of [HV, {'V, K' if case.layout == 'vk' else 'K, V'}] ({case.layout} layout)"
            + (f", a strided view: {case.pool_gap} spare heads after each slot" if case.pool_gap else ""),
        ),
    ]
    padded = [n for n, p in enumerate(case.padded) if p]
    lines.append(
        ("read slots", f"{list(case.read_slots)}" + (f": request(s) {padded} padded ({padding})" if padded else ""))
    )
    if case.write_slots is not None:
        lines.append(("write slots", f"{list(case.write_slots)} (split read / write pools)"))
    if case.token_slots is not None:
        lines.append(("token slots", f"{[list(r) for r in case.token_slots]} (a pool slot per token)"))
    if case.inter_rows:
        lines.append(
            (
                "intermediate",
                f"{case.inter_rows} rows x {case.inter_steps} steps"
                + (
                    f", a sliced view of {case.inter_steps + case.inter_spare_steps} steps"
                    if case.inter_spare_steps
                    else ""
                )
                + (f", row per request {list(case.inter_index)}" if case.inter_index is not None else ""),
            )
        )
    lines.append(("gates", _gates(case.gate)))
    lines.append(
        (
            "options",
            f"scale {'K^-0.5 (default)' if case.scale is None else case.scale}; q, k l2norm "
            f"{'in the kernel' if case.l2norm else 'off'}; state update "
            f"{'on' if case.update else 'off (disable_state_update)'}",
        )
    )
    if case.warm_pool:
        lines.append(
            (
                "warm-up",
                f"first an unjudged call on a pool {case.warm_pool} slots larger (same slots): a "
                "compile cache keyed without the pool capacity then serves the judged call",
            )
        )
    lines.append(("values", f"every tensor from seed {case.seed} (fuzz.model.values: the same bits on any device)"))
    return lines


def _operation(case: Case) -> str:
    if case.op == "prefill":
        return f"prefill: {case.B} sequences of {list(case.seqlens)} tokens, packed along one token axis (cu_seqlens)"
    what = "decode" if case.op == "decode" else "verify (multi-token prediction)"
    return f"{what}: B={case.B} requests of T={case.T} token{'s' if case.T > 1 else ''} each"


def _heads(case: Case) -> str:
    if not case.valid:
        return f"H={case.H} q/k heads, HV={case.HV} value heads: HV is not a multiple of H, the call must reject it"
    ratio = case.HV // case.H
    return f"H={case.H} q/k heads, HV={case.HV} value heads" + (f" (GVA: {ratio} per q/k head)" if ratio > 1 else "")


def _gates(gate: str) -> str:
    if gate == "mixed":
        return f"regime mixed: one of {', '.join(GATE_REGIMES)} per value head"
    (low, high), (centre, spread), b = GATE_REGIMES[gate]
    return f"regime {gate}: A_log in [{low}, {high}), a + dt_bias = {centre} + {spread} x N(0, 1), b = {b} x N(0, 1)"
