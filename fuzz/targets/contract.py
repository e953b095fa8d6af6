"""Release contracts: what a library release accepts, as data, whoever loads it.

A Contract row holds, for one target path and the releases it is written for (a PEP 440 specifier), the release's
shape preconditions (the (K, V) head dims and state dtypes its kernels take, the longest T) and its device
requirement (the CUDA compute-capability majors it runs on). Target.declared applies the row of the release a module
reports (its `__version__`), an installed library and an override module alike; a module that declares RUNS_ON = "cpu"
(a CPU stand-in) lifts the device requirement only, never the shape preconditions. A module that reports no release
has no row: only the adapter's own Support limits it. The CPU stand-in checks calls against the same rows
(fuzz.standins.flashinfer_cpu.release_api), so what the fuzzer draws and what the stand-in accepts are one table.

A precondition is a contract, never tolerance slack: a call outside it is rejected by the release, so it is not drawn.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import Version

CPU = "cpu"  # the RUNS_ON value of a CPU stand-in


@dataclass(frozen=True)
class Contract:
    """One release range's contract for one target path (None / (): no precondition of that kind)."""

    path: str
    versions: str  # PEP 440 specifier
    head_dims: tuple | None = None  # the (K, V) pairs the release takes
    state_dtypes: tuple | None = None  # the state dtypes it takes at those head dims
    max_T: int | None = None  # the most tokens per call it takes
    arch: tuple = ()  # the CUDA compute-capability majors it runs on
    why: str = ""

    def holds(self, path: str, version: str) -> bool:
        return path == self.path and Version(version) in SpecifierSet(self.versions)

    def applied(self, sup, runs_on: str | None = None):
        """`sup` (a fuzz.model.support.Support) inside this contract: head dims and state dtypes intersected (set
        where the Support leaves them to the profile), max_T lowered, arch the release's (none on a CPU stand-in)."""
        if self.head_dims is not None:
            sup = (
                dataclasses.replace(sup, head_dims=self.head_dims)
                if sup.head_dims is None
                else sup.narrowed(head_dims=self.head_dims)
            )
        limits = {
            name: value
            for name, value in (("state_dtypes", self.state_dtypes), ("max_T", self.max_T))
            if value is not None
        }
        sup = sup.narrowed(**limits)
        return dataclasses.replace(sup, arch=() if runs_on == CPU else self.arch)

    def violation(self, K: int, V: int, state_dtype: str, T: int | None = None) -> str | None:
        """Why a call of K, V, state dtype and T tokens is outside this contract, or None."""
        if self.head_dims is not None and (K, V) not in self.head_dims:
            return f"K={K}, V={V}: this path takes (K, V) in {list(self.head_dims)} only"
        if self.state_dtypes is not None and state_dtype not in self.state_dtypes:
            return f"{state_dtype} state: this path takes {', '.join(self.state_dtypes)} states only"
        if self.max_T is not None and T is not None and T > self.max_T:
            return f"T={T}: this path takes T <= {self.max_T} only"
        return None


def contract_for(rows: tuple[Contract, ...], path: str, version: str | None) -> Contract | None:
    """The first row for `path` that holds for `version` (None: no release reported, or none written for it)."""
    if version is None:
        return None
    return next((row for row in rows if row.holds(path, version)), None)


def runs_on(api) -> str | None:
    """Where a loaded API runs when it says so (RUNS_ON: "cpu" for a CPU stand-in); None: the library's device."""
    return getattr(api, "RUNS_ON", None)
