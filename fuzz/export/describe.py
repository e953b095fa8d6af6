"""A case, a call's contract and a finding in a library maintainer's words: the comment above an exported script's
tensors and the sentences of an upstream issue. No gdn-fuzz terms: keywords are the call's own (`names`: what the
call passes the pool, the intermediate buffer and the output as), the reference is "the gated delta rule in float64".
"""

from __future__ import annotations

import re

from fuzz.model.case import Case
from fuzz.targets.semantics import Semantics

_READ = {  # reference.contracts.PadContract.read, as what a padded request does
    "skip_zero": "reads and writes no state, and its output rows are zero",
    "skip_untouched": "reads and writes no state, and its output rows stay as the caller left them",
    "slot0": "reads and writes slot 0 (a scratch slot), its output rows unspecified",
    "zero_state": "runs from a zero state and writes no state",
    "discard": "reads and writes no live slot, and its output and intermediate rows are undefined (the engine "
    "discards them)",
}
# pieces of a corpus description that are about how gdn-fuzz found it, not about the library
_OURS = re.compile(r"H200|B200|campaign|masks|docs/|gate run|probe|shrink|gdn-fuzz|corpus|generator|as found", re.I)


def seen_on(description: str) -> str:
    """The GPU a corpus description says the finding was seen on ('an NVIDIA H200'), else ''."""
    gpu = re.search(r"\b([HB][12]00)\b", description)
    return f"an NVIDIA {gpu.group(1)}" if gpu else ""


def majors(gpu: tuple[int, ...]) -> str:
    """Compute capability majors in words: '9.x to 12.x', '10.x'."""
    if len(gpu) > 2 and list(gpu) == list(range(gpu[0], gpu[-1] + 1)):
        return f"{gpu[0]}.x to {gpu[-1]}.x"
    return " or ".join(f"{m}.x" for m in gpu)


def case_words(case: Case) -> str:
    """'decode: B=2 requests x T=1 token, H=1 q/k heads, HV=1 value heads, K=8, V=16; bf16 inputs, fp32 state'."""
    what = {"decode": "decode", "verify": "verify (multi-token)", "prefill": "prefill (varlen)"}[case.op]
    tokens = f"sequences of {list(case.seqlens)} tokens" if case.op == "prefill" else f"x T={case.T} tokens"
    padded = sum(case.padded)
    return (
        f"{what}: B={case.B} {tokens}, H={case.H} q/k heads, HV={case.HV} value heads, K={case.K}, V={case.V}; "
        f"{case.input_dtype} inputs, {case.state_dtype} state" + (f"; {padded} padded" if padded else "")
    )


def expectation(case: Case, sem: Semantics, names: dict[str, str]) -> str:
    """What the call must do with this case, in the call's keywords."""
    if not case.valid:
        return (
            f"HV={case.HV} value heads with H={case.H} q/k heads: HV must be a multiple of H (each q/k head serves "
            "HV / H value heads), so the call should raise instead of computing with some head map."
        )
    pool, inter = names.get("pool", "pool"), names.get("inter", "intermediate")
    slots, rows = names.get("slots", "slots"), names.get("rows")
    sentinel = "-1" if sem.pad.sentinel == "negative" else "0"
    text = f"Each request n starts from the state `{pool}[{slots}[n]]`"
    if case.op != "prefill" and not case.update:
        text += " and, with state updates disabled, writes no state back"
    else:
        text += " and writes its final state back " + (
            f"to `{pool}[{names.get('write_slots', 'write_slots')}[n]]`" if case.write_slots else "there"
        )
    if case.token_slots is not None:
        text += " (with per-token slots: the state after each token to that token's slot)"
    text += "."
    if any(case.padded):
        text += f" A request whose slot index is {sentinel} is padding: it {_READ[sem.pad.read]}."
    if case.inter_rows:
        row = f"{rows}[n]" if rows else "n"
        text += (
            f" Its state after token t goes to `{inter}[{row}, t]` for t < T={case.T}; every other row and step of "
            f"`{inter}` keeps what the caller put there."
        )
    return text + (
        " Every other pool slot, and the memory around each buffer, keeps its bits. Outputs and states match the "
        "gated delta rule computed in float64, within fp32 rounding: at most c times the error of the same reference "
        "re-run in float32, rounding where the kernel rounds, plus a few units in the last place of the largest value."
    )


def cleaned(description: str, function: str) -> str:
    """A corpus description without the function name it may open with and the clauses about how gdn-fuzz found it
    (the campaign, the GPU run, the value generator)."""
    text = description.removeprefix(f"{function}: ").removeprefix(f"{function} ")
    text = re.sub(r"\s*\([^()]*\)", lambda m: "" if _OURS.search(m.group()) else m.group(), text)
    pieces = [p for p in re.split(r";\s+", text) if not _OURS.search(p)]
    return "; ".join(pieces).strip().rstrip(".")
