"""The value regimes a case's tensors are drawn in: each decay regime's parameters (the Case names the regime,
fuzz.model.case.DECAYS) and the per-token magnitudes of q, k and v. fuzz.generate.materialize draws from them
(an exported script carries them, with materialize)."""

from __future__ import annotations

from fuzz.model.case import DECAY_NAMES

# Decay regimes: (A_log range, a + dt_bias centre and spread, b spread). Together they cover exp(g) ~ 1
# (no decay) through ~0.5 to 0 (full forgetting), the softplus threshold at 20, and saturation where a
# careless kernel produces inf - inf or 0 * inf.
DECAY_REGIMES = {
    "mild": ((-1.0, 0.5), (0.0, 1.0), 1.0),
    "nodecay": ((-14.0, -10.0), (-2.0, 1.0), 4.0),
    "forget": ((1.0, 2.5), (6.0, 2.0), 1.0),
    "threshold": ((-4.0, -2.0), (20.0, 1.5), 2.0),
    "saturated": ((0.0, 3.0), (40.0, 60.0), 40.0),
    "negsat": ((-1.0, 1.0), (-60.0, 30.0), 40.0),
}
assert tuple(DECAY_REGIMES) == DECAY_NAMES, "a regime a Case may name has no parameters here, or the other way round"
# Per-token magnitudes of q, k, v: exact powers of two from 2^-10 (an eps-dominated l2norm) to 2^3 (large v).
MAGNITUDES = tuple(2.0**e for e in range(-10, 4))
