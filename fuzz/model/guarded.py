"""A writable buffer between guard regions (`Guarded`), and where a wrapped element offset lands (`Wrap`).

Every buffer a target may write (pool, intermediate states, output) lives inside a larger allocation whose surplus
is filled with the NaN GUARD pattern (fuzz.model.patterns). The output and intermediate buffers start as the POISON
pattern; the pool starts as filler (a function of the seed and the element's place, fuzz.model.values, so any block
of it can be regenerated) with the slots a request names set to the case's values, a copy of which is kept. After the
call, the verdict needs no copy of anything else: guard bits changed -> out-of-bounds write; poison left where the
contract says "written" -> unwritten output; a slot or row the contract leaves alone no longer equal to its filler,
kept copy or poison -> corruption. So an 8 GiB pool costs its 8 GiB, not three times that.

A buffer whose element offsets pass 2^(OFFSET_BITS-1) (the int32 overflow class: a pool's top slots, `large` cases)
sits that many elements above the start of its allocation, and every one of them is guard: a kernel that computes
an element offset in int32 wraps it by 2^32 and writes there, below the buffer, where the verdict finds the changed
guard and names the slot whose offset wrapped (`Guarded.wrapped`), instead of a crash or a write into memory we do
not own. On a GPU that guard costs 2^31 elements (8 GiB of fp32), so such cases run one at a time (fuzz.run.memory).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

import torch

from fuzz.model.patterns import bits, fill_pattern, pattern
from fuzz.model.values import Values

GUARD_SLOTS = 2  # pool slots on each side: index -1 and -2 land here
OFFSET_BITS = 32  # the integer width a kernel's element offsets may wrap at (an override module may declare a smaller)
CHUNK = 1 << 24  # elements per block when filling or checking large buffers


@dataclass
class Guarded:
    """`view` is what the target sees: rows lead.. of `full`, the first dim-1 entries of each row. Its starting
    content: the poison pattern, or (the pool) the filler of `seed` with rows `kept_rows` overwritten by `kept`."""

    full: torch.Tensor
    view: torch.Tensor
    lead: int
    seed: int | None = None  # the pool: the view started as Values(seed).filler in its logical element order
    kept_rows: torch.Tensor | None = None  # [n] int64: rows set to the case's values
    kept: torch.Tensor | None = None  # [n, ...]: a copy of those rows as set
    offset_bits: int = OFFSET_BITS  # the wrap the leading guard was sized for (lead_rows)

    @classmethod
    def around(
        cls, shape: tuple, dtype, device, lead: int, spare_dim1: int = 0, offset_bits: int = OFFSET_BITS
    ) -> Guarded:
        """Allocate [below + shape[0] + lead, shape[1] + spare_dim1, *shape[2:]] of guard and view the inner block;
        below = lead_rows(...): `lead` rows, or enough to hold a wrapped offset's landing."""
        full_shape = (shape[0], shape[1] + spare_dim1, *shape[2:])
        below = lead_rows(full_shape, lead, offset_bits)
        full = fill_pattern(
            torch.empty((below + shape[0] + lead, *full_shape[1:]), dtype=dtype, device=device), "guard"
        )
        return cls(full, full[below : below + shape[0], : shape[1]], below, offset_bits=offset_bits)

    @property
    def row_numel(self) -> int:
        return math.prod(self.view.shape[1:])

    def fill(self, seed: int, skip: Collection[int] = ()) -> None:
        """Set the view to the filler of `seed`, block by block (an 8 GiB pool never exists twice); rows in `skip`,
        which the caller sets next (`keep`), are not filled first: a pool of many named slots would pay for its filler
        twice, and the filler of a row is the same wherever its block starts."""
        self.seed = seed
        per, n, skipped = max(1, CHUNK // max(self.row_numel, 1)), self.view.shape[0], set(skip)
        start = 0
        while start < n:
            if start in skipped:
                start += 1
                continue
            stop = start + 1
            while stop < min(n, start + per) and stop not in skipped:
                stop += 1
            self.view[start:stop] = self.initial(start, stop)
            start = stop

    def initial(self, start: int, stop: int) -> torch.Tensor:
        """Rows start..stop of the view as they began, before the named rows were set (filler or poison)."""
        shape = (stop - start, *self.view.shape[1:])
        if self.seed is None:
            return fill_pattern(torch.empty(shape, dtype=self.view.dtype, device=self.view.device), "poison")
        numel = math.prod(shape)
        values = Values(self.seed, self.view.device).filler(numel, start * self.row_numel)
        return values.reshape(shape).to(self.view.dtype)

    def keep(self, rows: list[int], values: torch.Tensor) -> None:
        self.kept_rows = torch.tensor(rows, dtype=torch.int64, device=self.view.device)
        self.view[self.kept_rows] = values.to(self.view.dtype)
        self.kept = self.view[self.kept_rows].clone()

    def before(self, rows: list[int]) -> torch.Tensor:
        """What these view rows held before the call (for small checks and tests)."""
        out = torch.cat([self.initial(r, r + 1) for r in rows]) if rows else self.view[:0].clone()
        if self.kept_rows is not None:
            where = {r: i for i, r in enumerate(self.kept_rows.tolist())}
            for j, r in enumerate(rows):
                if r in where:
                    out[j] = self.kept[where[r]]
        return out

    @property
    def before_view(self) -> torch.Tensor:
        return self.before(list(range(self.view.shape[0])))

    def outside_changed(self) -> tuple | None:
        """The first allocation index outside the view whose guard bits changed (None: none did), in address order
        within each region: below the view, past it, then the gaps of a strided view; block by block."""
        n, keep1, rows_total = self.view.shape[0], self.view.shape[1], self.full.shape[0]
        regions = [(0, self.lead, slice(None)), (self.lead + n, rows_total, slice(None))]
        if self.full.shape[1] > keep1:  # the gaps of a strided view
            regions.append((self.lead, self.lead + n, slice(keep1, None)))
        per = max(1, CHUNK // max(math.prod(self.full.shape[1:]), 1))
        guard = pattern(self.full.dtype, "guard")
        for first, last, cols in regions:
            for r in range(first, last, per):
                changed = bits(self.full[r : min(r + per, last), cols]) != guard
                if changed.any():
                    at = changed.nonzero()[0].tolist()
                    return (at[0] + r, at[1] + (cols.start or 0), *at[2:])
        return None

    def element(self, index: tuple) -> int:
        """An allocation index as an element offset from the view's first element (negative: below the view), the
        way a kernel addressing the view with its strides counts."""
        offset = sum(i * s for i, s in zip(index, self.full.stride()))
        return offset - self.lead * self.full.stride(0)

    def wrapped(self, element: int) -> Wrap | None:
        """Which view row's offset, wrapped at 2^offset_bits, lands on this element offset (as elements, or as bytes
        of the view's itemsize); None when none does."""
        stride, size = self.full.stride(0), self.full.element_size()
        for unit, shift in (("element", 2**self.offset_bits), ("byte", 2**self.offset_bits // size)):
            for k in (1, -1):
                row = (element + k * shift) // stride
                if 0 <= row < self.view.shape[0]:
                    return Wrap(row, k, unit, self.offset_bits, element)
        return None

    def changed_rows(self, rows: list[int]) -> list[int]:
        """Which of these view rows no longer hold what they started with (compared bit for bit): the kept rows
        against their copies, the others against their regenerated start, CHUNK elements at a time over the blocks
        that hold any of them (a few device passes and one read back, whatever the number of rows)."""
        n, device = self.view.shape[0], self.view.device
        wanted = torch.zeros(n, dtype=torch.bool, device=device)
        if not rows:
            return []
        wanted[torch.tensor(rows, dtype=torch.int64, device=device)] = True
        changed = torch.zeros(n, dtype=torch.bool, device=device)
        rest = set(rows)
        if self.kept_rows is not None:
            differs = (bits(self.view[self.kept_rows]) != bits(self.kept)).flatten(1).any(1)
            changed[self.kept_rows] = differs & wanted[self.kept_rows]
            wanted[self.kept_rows] = False
            rest -= set(self.kept_rows.tolist())
        per = max(1, CHUNK // max(self.row_numel, 1))
        for r in sorted({row // per * per for row in rest}):
            stop = min(r + per, n)
            diff = (bits(self.view[r:stop]) != bits(self.initial(r, stop))).flatten(1).any(1)
            changed[r:stop] |= diff & wanted[r:stop]
        return changed.nonzero().squeeze(1).tolist()


@dataclass(frozen=True)
class Wrap:
    """A write outside a buffer explained by a wrapped offset: view row `row`'s data landed 2^bits units (elements or
    bytes) `direction` below (+1) or above (-1) its place, at element offset `landed` from the view."""

    row: int
    direction: int
    unit: str
    bits: int
    landed: int

    def describe(self, what: str) -> str:
        """'slot 65537's state landed 2^32 elements below its place (element -2147450880 from the pool)'."""
        side = "below" if self.direction > 0 else "above"
        return (
            f"{what} {self.row}'s data landed 2^{self.bits} {self.unit}s {side} its place (element "
            f"{self.landed} from the buffer's first): an int{self.bits} {self.unit} offset wrapped"
        )


def lead_rows(full_shape: tuple, lead: int, offset_bits: int = OFFSET_BITS) -> int:
    """Guard rows below a buffer of allocation shape [rows, ...]: `lead`, or, when its element offsets pass
    2^(offset_bits-1), enough rows to hold 2^(offset_bits-1) elements, where such an offset wrapped lands."""
    row = math.prod(full_shape[1:])
    if full_shape[0] * row <= 2 ** (offset_bits - 1):
        return lead
    return max(lead, -(-(2 ** (offset_bits - 1)) // max(row, 1)))
