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


def test_each_gpu_model_has_its_row_and_auto_says_whether_a_sweep_measured_it():
    h100, h200 = ("NVIDIA H100 80GB HBM3", 79 << 30), ("NVIDIA H200", 140 << 30)
    assert workers.sweep_of(h100[0]) is workers.SWEEPS["h100"] and workers.sweep_of(h200[0]) is workers.SWEEPS["h200"]
    for model, sweep in workers.SWEEPS.items():
        if sweep.measured is None:  # until the sweep runs there, auto keeps the rule it had, and says so
            assert "not measured" in sweep.source and workers.PEAK[model] == sweep.rule
        else:
            assert workers.PEAK[model] == sweep.measured
    line = workers.auto_line([h200], cores=64)
    assert line.startswith(f"--gdn-workers auto: {workers.PEAK['h200']} workers") and "NVIDIA H200" in line
    assert workers.SWEEPS["h200"].source in line


def test_runs_sharing_a_gpu_split_its_count():
    assert workers.shared(14, 1) == 14 and workers.shared(14, 3) == 4 and workers.shared(2, 3) == 1
