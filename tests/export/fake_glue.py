"""A serving-glue target for the exporter's extension point (fuzz.export.snippets: a target supplies export_snippet),
standing for the SGLang / vLLM glue targets: its adapter calls an engine's glue module (tests/export/fake_engine's
fakeengine.gdn), which the engine's package init makes unimportable without the serving stack; `load_fake_engine` is
the gdn-fuzz loader that makes it importable anyway (an empty package over the real folder, a stub for the stack),
as fuzz.targets.sglang_glue_loader does for SGLang. An exported script embeds that loader and imports the engine's
module itself."""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types

import torch

from fuzz.export.snippets import Snippet
from fuzz.model.case import Case
from fuzz.model.support import Support
from fuzz.model.tensors import Tensors
from fuzz.targets.base import Family, Target


def load_fake_engine() -> None:
    """fakeengine as an empty package over its installed folder, with fakeengine.server stubbed."""
    spec = importlib.util.find_spec("fakeengine")  # a top-level package: no code runs
    package = importlib.machinery.ModuleSpec("fakeengine", None, is_package=True)
    package.submodule_search_locations = list(spec.submodule_search_locations)
    sys.modules.setdefault("fakeengine", importlib.util.module_from_spec(package))
    server = sys.modules.setdefault("fakeengine.server", types.ModuleType("fakeengine.server"))
    server.ServerArgs = object


class FakeEngineFamily(Family):
    distribution = "fakeengine"

    def load_real(self):
        load_fake_engine()
        module = importlib.import_module("fakeengine.gdn")
        module.__version__ = "1.0"
        return module


class FakeGlueTarget(Target):
    family = FakeEngineFamily("fakeengine", ("gdn_decode",))
    name, path, needs = "fake-glue", "sglang.recurrent_update", ("gdn_decode",)
    support = Support(ops=frozenset({"decode"}))

    def call(self, case: Case, t: Tensors) -> torch.Tensor:
        return self.family.api().gdn_decode(
            q=t.q, k=t.k, v=t.v, g=t.g, beta=t.beta, initial_state=t.pool.view, initial_state_indices=t.read_slots
        )

    def export_snippet(self, case: Case) -> Snippet:
        return Snippet(loader=("tests.export.fake_glue", "load_fake_engine"), module="fakeengine.gdn")
