"""The library release a finding is about, and the pip lines an exported script and its issue body give.

A corpus entry holds for a release range; an issue names one release a maintainer can install: the entry's own where
it pins one (`==0.5.23`), else the newest release in its range that the known-bug record it replays was confirmed on,
else the newest release gdn-fuzz knows for the library in that range (every record's releases, the installed one),
else the range itself as a pip specifier. A case without an entry is about the installed release.
"""

from __future__ import annotations

import importlib.metadata

from packaging.version import InvalidVersion, Version

from fuzz.model.known_bugs import BY_ID, KNOWN_BUGS
from fuzz.run import corpus
from fuzz.targets.base import Target

DISTRIBUTIONS = {"fla": "fla-core", "sglang": "sglang", "flashinfer": "flashinfer-python", "vllm": "vllm"}
# top-level module -> distribution, for the packages a script may find missing beyond its library: the Triton
# families' (interpreted on a CPU: numpy) and FlashInfer's own
PACKAGES = {
    "fla": {"torch": "torch", "numpy": "numpy", "triton": "triton", "einops": "einops"},
    "sglang": {"torch": "torch", "numpy": "numpy", "triton": "triton"},
    "vllm": {"torch": "torch", "numpy": "numpy", "triton": "triton", "einops": "einops"},
    "flashinfer": {"torch": "torch", "numpy": "numpy", "cutlass": "nvidia-cutlass-dsl", "tvm_ffi": "apache-tvm-ffi"},
}
MODULES = {"fla-core": "fla", "sglang": "sglang", "flashinfer-python": "flashinfer", "vllm": "vllm"}


def distribution(target: Target) -> str:
    """The distribution the target's library is installed as: its family's own word, else the table's."""
    return getattr(target.family, "distribution", None) or DISTRIBUTIONS.get(target.family.name, target.family.name)


def installed(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def known(family: str) -> set[str]:
    """The releases of a library family that gdn-fuzz's known-bug records name (first seen, confirmed on, fixed in)."""
    releases = set()
    for bug in KNOWN_BUGS:
        if any(path.partition(".")[0] == family for path in bug.paths):
            releases |= {bug.first_seen, *bug.seen_on, *([bug.fixed_in] if bug.fixed_in else [])}
    return releases


def pinned(target: Target, entry: corpus.Entry | None) -> str | None:
    """The one release the finding is about (module doc); None where only a range can be named."""
    dist = distribution(target)
    here = installed(dist)
    if entry is None:
        return here
    versions = entry.versions
    exact = [s.version for s in versions if s.operator == "=="]
    if exact:
        return exact[0]
    bug = BY_ID.get(entry.bug) if entry.bug else None
    for candidates in (set(bug.seen_on) if bug else set(), known(target.family.name) | {here} - {None}):
        inside = [r for r in candidates if _parses(r) and Version(r) in versions]
        if inside:
            return max(inside, key=Version)
    return None


def _parses(release: str) -> bool:
    try:
        Version(release)
    except InvalidVersion:
        return False
    return True


def requirement(target: Target, release: str | None, entry: corpus.Entry | None) -> str:
    """'flashinfer-python==0.7.2.post1', or the entry's range where no release is known ('sglang>=0.5.20')."""
    dist = distribution(target)
    if release:
        return f"{dist}=={release}"
    return f"{dist}{entry.versions}" if entry is not None and str(entry.versions) else dist


def flashinfer_under(target: Target) -> str | None:
    """'flashinfer-python==0.7.4' where the target is SGLang's FlashInfer glue (on a GPU it calls the installed
    FlashInfer): the release installed here, else the newest gdn-fuzz knows; None for any other target."""
    if target.family.name != "sglang-glue" or getattr(target, "arch", None) is None:
        return None
    dist = DISTRIBUTIONS["flashinfer"]
    return f"{dist}=={installed(dist) or max(known('flashinfer'), key=Version)}"


def install_line(target: Target, requirement_text: str) -> str:
    """The shell line that installs what the script needs: torch, the library (SGLang's and vLLM's kernel files need
    triton and no serving stack: --no-deps; vLLM's import einops), numpy where Triton runs interpreted on a CPU, and
    FlashInfer under SGLang's FlashInfer glue."""
    if target.family.name in ("sglang", "sglang-glue"):
        under = f" '{flashinfer_under(target)}'" if flashinfer_under(target) else ""
        return f"pip install torch triton numpy{under} && pip install --no-deps '{requirement_text}'"
    if target.family.name == "vllm":
        return f"pip install torch triton numpy einops && pip install --no-deps '{requirement_text}'"
    if target.family.name == "fla":
        return f"pip install torch triton numpy '{requirement_text}'"
    return f"pip install torch '{requirement_text}'"


def requires(target: Target, release: str | None) -> dict[str, tuple[str, str | None]]:
    """Top-level module -> (distribution, version) for a script's NOT RUN line: this machine's versions (torch's
    without its local build tag: PyPI has no '+cpu'), the library's pinned release."""
    out = {}
    for module, dist in PACKAGES.get(target.family.name, {"torch": "torch", "numpy": "numpy"}).items():
        version = installed(dist)
        out[module] = (dist, version.split("+")[0] if version else None)
    dist = distribution(target)
    out[MODULES.get(dist, dist.replace("-", "_"))] = (dist, release)
    return out
