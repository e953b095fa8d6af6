"""DRY=1 only (setup.sh puts this folder on PYTHONPATH): FlashInfer's CPU stand-in imitating 0.7.2.post1 and 0.7.4,
each with the bf16-state write-back those releases skip past the wide_vec threshold (an intermediate buffer, state
updates on, B*HV >= 128: tests/mutants.py WideVecSkipsWriteBack), so the masks-off call finds
`wide-vec-no-writeback` on the CPU where the real kernels should show it on the GPU."""

from fuzz.standins.flashinfer_cpu import release_api
from tests.mutants import WideVecSkipsWriteBack

release_0_7_2 = release_api("0.7.2.post1", WideVecSkipsWriteBack())
release_0_7_4 = release_api("0.7.4", WideVecSkipsWriteBack())
