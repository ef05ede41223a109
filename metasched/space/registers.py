"""The vector register file as the register tile sees it: how many rows a tile of some vectors may
take, and which of two tiles is better. Shared by the tiling rule (a tail sketch's default pixels
per tile) and the default schedule (every register tile).

A register tile of ``rows`` x ``vectors`` accumulators reduces by loading ``vectors`` vectors of
the weight and broadcasting one element per row, so its registers are its accumulators, the
weight's vectors and a broadcast register. With AVX2 (16 vector registers), 3 rows x 4 vectors
is 17: one accumulator spills, and its store -> load chain through the stack runs the loop.
"""

from __future__ import annotations

__all__ = ["best_rows", "most_vectors", "register_count", "row_limit", "tile_key"]


def register_count(lanes: int) -> int:
    """Vector registers of a target whose float32 vectors have ``lanes`` lanes: 32 with AVX-512,
    16 otherwise (AVX2; AArch64's 32 NEON registers of 4 lanes are counted as 16: conservative)."""
    return 32 if lanes >= 16 else 16


def row_limit(vectors: int, lanes: int) -> int:
    """The most rows a register tile of ``vectors`` vectors may take: its accumulators within
    about 3/4 of the register file, and with the weight's vectors and a broadcast register beside
    them, within all of it (Inception v3's 3x3 convolution 147 x 147, 32 -> 64, as 3 rows x 4
    vectors on a Zen 3 at 1 thread: 17 registers, 38 GFLOP/s; onnxruntime 82).

    >>> row_limit(4, 8), row_limit(2, 8), row_limit(4, 16)
    (2, 6, 6)
    """
    registers = register_count(lanes)
    return min(registers * 3 // 4 // vectors, (registers - vectors - 1) // vectors)


def most_vectors(rows: int, lanes: int, limit: int) -> int:
    """The most vectors, up to ``limit``, a register tile of ``rows`` rows leaves room for
    (``row_limit``); 1 when even one does not.

    >>> most_vectors(6, 8, 4), most_vectors(8, 8, 4), most_vectors(8, 16, 4)
    (2, 1, 3)
    """
    return max([v for v in range(1, limit + 1) if row_limit(v, lanes) >= rows], default=1)


def tile_key(rows: int, vectors: int, lanes: int) -> tuple[float | int, ...]:
    """How good a register tile of ``rows`` x ``vectors`` accumulators is, before finer
    preferences (greater is better).

    With AVX2: first the share of the FMA units the tile can keep busy, then the most
    accumulators, then two vectors over one. A step of the reduction issues ``rows * vectors``
    FMAs (two a cycle) and ``rows + vectors`` loads (a broadcast per row, a vector per weight
    vector; two a cycle), and each accumulator's FMAs wait for the one before (about 4 cycles):
    a step takes ``max(rows * vectors, rows + vectors, 8) / 2`` cycles for ``rows * vectors / 2``
    cycles of FMAs. A tile of one vector loads a broadcast per FMA: 8 rows x 1 vector is 9 loads
    for 8 FMAs against 6 for 4 x 2 (ResNet's 3x3 convolution 56 x 56, 64 -> 64, on a Zen 3 at 1
    thread: 3.6 ms as 8 x 1, 2.8 ms as 4 x 2; onnxruntime 2.7), and 11 x 1 is 12 loads for 11
    FMAs against 7 for 10 as 5 x 2 (SqueezeNet's 3x3 convolution 55 x 55, 16 -> 64, Zen 3, 1
    thread, built side by side: 0.83 ms as 11 x 1, 0.72 ms as 5 x 2).

    With AVX-512 (not measured the same way) the order stays the most accumulators, then rows.

    >>> tile_key(4, 2, 8) > tile_key(8, 1, 8), tile_key(5, 2, 8) > tile_key(11, 1, 8)
    (True, True)
    """
    accumulators = rows * vectors
    if lanes >= 16:
        return (accumulators, 0)
    busy = accumulators / max(accumulators, rows + vectors, 8)
    return (round(busy, 3), accumulators, min(vectors, 2))


def best_rows(choices: list[int], vector_extent: int, lanes: int, max_vectors: int) -> int:
    """The index of the best of ``choices``, row counts of a register tile whose vectors cover
    up to ``max_vectors`` vectors of a loop of ``vector_extent`` elements (each row count with the
    most vectors it leaves room for): by ``tile_key``, then more rows. With AVX2, of a tail
    sketch's 3, 4, 5, 6 or 8 pixels, 6 (x 2 vectors: 12 accumulators, 8 x 1 holds 8); with
    AVX-512, 8 (x 3 vectors).

    >>> best_rows([3, 4, 5, 6, 8], 64, 8, 4), best_rows([3, 4, 5, 6, 8], 64, 16, 4)
    (3, 4)
    """
    available = max(1, min(max_vectors, vector_extent // lanes))

    def key(index: int) -> tuple[float | int, ...]:
        rows = choices[index]
        return (*tile_key(rows, most_vectors(rows, lanes, available), lanes), rows)

    return max(range(len(choices)), key=key)
