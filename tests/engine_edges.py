"""A child pytest's plugin (`-p tests.engine_edges`) that fuzzes the FlashInfer fp32 pretranspose as if it were an
SGLang glue target (Support.engine = "sglang": engine index rules and contract edges), and an override module whose
one defect shows only on an edge: `--gdn-target flashinfer=tests.engine_edges:slot_zero_skipped`."""

from __future__ import annotations

import dataclasses

from fuzz.standins.flashinfer_cpu import FlashInferCPU

TARGET = "flashinfer-pretranspose-fp32"


def pytest_configure(config):
    from fuzz.targets.registry import TARGETS

    target = next(t for t in TARGETS if t.name == TARGET)
    target.support = dataclasses.replace(target.support, engine="sglang")


class SlotZeroSkipped(FlashInferCPU):
    """Reads slot 0 as padding: a request named on the reserved slot (the slot-zero edge) is skipped."""

    def read_slot(self, path, idx):
        slot, runs = super().read_slot(path, idx)
        return slot, runs & (idx != 0)


slot_zero_skipped = SlotZeroSkipped()
