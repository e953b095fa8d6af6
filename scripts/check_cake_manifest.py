"""Check the Cake targets' declared (H, HV) pairs against a FlashInfer wheel's Cake manifest (run it when the
FlashInfer version moves; exit 1 on a difference).

    python scripts/check_cake_manifest.py /tmp/gdn_wheels/flashinfer_python-0.7.4-py3-none-any.whl
"""

import json
import sys
import zipfile

from fuzz.targets import flashinfer_sm100

SCALE = 128**-0.5
# sm_100a's state-head bands (jit/cake_gdn.py CAKE_GDN_BF16_T1_ROUTE_BANDS): (schedule, TILE_V) per band.
BF16_T1_BANDS = tuple(
    (f"pretranspose_{s}", tile)
    for s, tile in (
        ("t1_bf16state_vec8", 16),
        ("t1_bf16state_vec8occ", 32),
        ("t1_bf16state_vec8", 64),
        ("t1_bf16state_vec8occ", 64),
        ("mtp_t4_bf16state_wide128", 128),
    )
)


def sm100_decode_records(wheel_path: str) -> list[tuple]:
    """(schedule, H, HV, SCALE, TILE_V, T_STEPS) of the manifest's decode records built for sm_100a."""
    with zipfile.ZipFile(wheel_path) as wheel:
        manifest = json.loads(wheel.read("flashinfer/data/csrc/gdn/cake/manifest.json"))
    out = []
    for r in manifest["variants"]:
        if r["name"].startswith("decode_") and any("sm_100a" in o["architectures"] for o in r["outputs"]):
            s = r["specializations"]
            schedule = r["name"].rsplit("_", 1)[0].removeprefix("decode_gdn_decode_")
            out.append(
                (schedule, s["H"], s["HV"], s["SCALE"], s.get("TILE_V", s.get("TILE_V_WIDE")), s.get("T_STEPS", 1))
            )
    return out


def heads_with(records, *schedules) -> list[tuple]:
    """(H, HV) pairs with a T = 1 record at the default scale for every (schedule, tile) given."""

    def has(heads, schedule, tile):
        return any(
            r[0] == schedule and (r[1], r[2]) == heads and r[3] == SCALE and r[5] == 1 and tile in (None, r[4])
            for r in records
        )

    return sorted(h for h in {(r[1], r[2]) for r in records} if all(has(h, s, t) for s, t in schedules))


def main(wheel_path: str) -> int:
    records = sm100_decode_records(wheel_path)
    checks = {
        "CAKE_BF16_T1_HEADS": (heads_with(records, *BF16_T1_BANDS), flashinfer_sm100.CAKE_BF16_T1_HEADS),
        "CAKE_FP32_T1_HEADS": (
            heads_with(records, ("pretranspose_splitv8", None)),
            flashinfer_sm100.CAKE_FP32_T1_HEADS,
        ),
        # every batch size: both the small (B < 32) and the large body
        "CAKE_KMAJOR_T1_HEADS": (
            heads_with(records, ("nontranspose_fp32_t1_small", None), ("nontranspose_fp32_t1", None)),
            flashinfer_sm100.CAKE_KMAJOR_T1_HEADS,
        ),
    }
    bad = 0
    for name, (manifest, declared) in checks.items():
        same = manifest == sorted(declared)
        bad += not same
        print(f"{name}: {'matches' if same else 'DIFFERS'}; manifest {manifest}, declared {sorted(declared)}")
    return int(bad > 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
