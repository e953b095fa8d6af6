"""--gdn-workers (fuzz.run.workers): the count per GPU where the sweep peaked, capped by free memory and cores."""

from __future__ import annotations

import pytest

from fuzz.run import workers


def test_auto_takes_each_gpus_measured_peak_capped_by_its_memory_and_the_cores():
    h200 = ("NVIDIA H200", 140 << 30)
    assert workers.auto_workers([h200], cores=64) == workers.PEAK["h200"]
    assert workers.auto_workers([h200, h200], cores=64) == 2 * workers.PEAK["h200"]
    assert workers.auto_workers([h200], cores=6) == 6
    assert workers.auto_workers([("NVIDIA H200", 9 * workers.WORKER_BYTES)], cores=64) == 9
    assert workers.auto_workers([("Some GPU", 140 << 30)], cores=64) == workers.DEFAULT_PEAK
    assert workers.auto_workers([("NVIDIA H200", 0)], cores=64) == 1  # never none


def test_a_count_is_taken_as_given_and_anything_else_is_one_line():
    assert workers.resolve("3", "cuda") == 3
    assert workers.resolve("auto", "cpu") >= 1
    for bad in ("0", "-2", "many"):
        with pytest.raises(ValueError, match=f"--gdn-workers={bad}: expected a positive count or 'auto'"):
            workers.resolve(bad, "cuda")
