"""The body of every exported script (fuzz.export.script copies this file's code into it, after the script's own
docstring and settings): it installs the embedded modules, then runs the case exactly as the fuzzer does, with
fuzz.run.harness.check, and prints the verdict. It imports only the standard library at import time: in the
script it runs before any gdn-fuzz module exists. No `from __future__` import, which only a file's top may hold.

Exit status and last line: 1 `REPRODUCED: <kind>: <detail>`, 0 `NOT REPRODUCED`, 2 `NOT RUN: <why>` (`NOT RUN: the
library did not load` when the kernel library, or the override module, fails to import).
"""

import argparse
import importlib
import importlib.abc
import importlib.util
import linecache
import os
import sys
import traceback


class EmbeddedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """First on sys.meta_path: serves the embedded sources under their own module names (a dotted prefix of one is
    a package, empty where it has no source). Any other module of their top-level packages fails to import, so the
    script never runs gdn-fuzz code it does not carry, even where a gdn-fuzz is installed."""

    def __init__(self, sources: dict, where: str):
        self.sources, self.where = sources, where
        self.roots = {name.partition(".")[0] for name in sources}

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in self.roots:
            return None
        package = any(other.startswith(name + ".") for other in self.sources)
        if name not in self.sources and not package:
            raise ModuleNotFoundError(f"{name} is not embedded in this script", name=name)
        spec = importlib.util.spec_from_loader(name, self, origin=self.filename(name, package), is_package=package)
        spec.has_location = True  # __file__: tracebacks name the embedded file
        return spec

    def filename(self, name: str, package: bool) -> str:
        return f"{self.where}:{name.replace('.', '/')}{'/__init__' if package else ''}.py"

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        source, filename = self.sources.get(module.__name__, ""), module.__spec__.origin
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # traceback lines
        exec(compile(source, filename, "exec", dont_inherit=True), module.__dict__)


def main(case_text: str, target_name: str, adapter: str, override, sources: dict, argv=None) -> int:
    parser = argparse.ArgumentParser(description=f"Reproduce the gdn-fuzz case {case_text} on {target_name}.")
    parser.add_argument("--device", choices=("cpu", "cuda"), help="where to run (default: cuda when a GPU is there)")
    parser.add_argument(
        "--dump",
        metavar="FILE",
        help="also save the case's tensors, as materialize() builds them before the call, to FILE (torch.save)",
    )
    args = parser.parse_args(argv)
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":  # Triton kernels run on a CPU only interpreted, chosen before triton is imported
        os.environ.setdefault("TRITON_INTERPRET", "1")
    sys.meta_path.insert(0, EmbeddedModules(sources, os.path.basename(sys.argv[0] or "repro.py")))
    from fuzz.export.call import tapping
    from fuzz.model.case import Case
    from fuzz.run.environment import environment
    from fuzz.run.harness import check
    from fuzz.targets.base import Unavailable

    case = Case.parse(case_text)
    target = next(t for t in importlib.import_module(adapter).TARGETS if t.name == target_name)
    target.family.reset(override)
    print(f"case:        {case!r}\ntarget:      {target.name} ({target.path}), on {device}")
    print("environment: " + ", ".join(f"{key} {value}" for key, value in environment().items() if value))
    if args.dump:
        dump(case, device, args.dump)
    try:
        target.api()
    except Unavailable as e:
        print(f"{e}\nNOT RUN: the library did not load")
        return 2
    reason = target.unavailable_reason(device)
    if reason:
        print(f"NOT RUN: {reason}")
        return 2
    print(f"library:     {f'override {override}' if override else f'{target.family.name} {target.release()}'}")
    try:
        with tapping(target, stop=False) as calls:  # records each library call, then makes it
            result = check(target, case, device, on_phase=lambda phase: judged(phase, calls))
    except Exception:  # noqa: BLE001 - the check itself broke: a gdn-fuzz bug, never a finding
        traceback.print_exc()
        print("NOT RUN: the check broke (a gdn-fuzz bug, not a finding)")
        return 2
    if calls:
        print("the call, as made here:\n" + "\n".join(f"    {line}" for line in calls[0].lines()))
    for c in result.comparisons:
        print(f"{c.kind:<13} max error {c.worst:.3g}, bound {c.bound:.3g}")
    if result.failure is None:
        print("NOT REPRODUCED")
        return 0
    for note in result.failure.notes:
        print(note)
    print(f"cause:       {result.failure.cause}")
    print(f"REPRODUCED: {result.failure.kind}: {result.failure.detail}")
    return 1


def judged(phase: str, calls: list) -> None:
    """The check's phase hook: the calls recorded before the judged one (a warm-up call) are not shown."""
    if phase == "kernel call":
        calls.clear()


def dump(case, device: str, path: str) -> None:
    """materialize()'s tensors by name; a guarded buffer as NAME.full (the allocation) and NAME.view (what the
    target gets), saved together so the views keep their place in the allocation."""
    import torch

    from fuzz.generate.materialize import materialize
    from fuzz.model.guarded import Guarded

    tensors = {}
    for name, value in vars(materialize(case, device)).items():
        if isinstance(value, Guarded):
            tensors |= {f"{name}.full": value.full, f"{name}.view": value.view}
        else:
            tensors[name] = value
    torch.save(tensors, path)
