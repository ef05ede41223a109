"""Tensorization candidates: where a registered tensor intrinsic fits a block, and how to use it.

TensorIR (ASPLOS'23) section 4.2, for blocks of one store such as ``C = C + A * B``:

1. *Expression pattern.* The intrinsic's description (``desc``) holds one block; its update
   must have the block's form: the same operators (the combiner, the multiply, the casts) with
   the description's buffer parameters where the block has loads. That names each block buffer
   by the parameter it plays (its *role*); a dtype, a cast or a combiner that differs says why
   not.
2. *Characteristic vectors.* An iterator's vector is the set of roles whose indices use it
   (matmul: ``i`` indexes C and A, ``j`` C and B, ``k`` A and B). The block's iterators that
   share a vector are fused into one; each intrinsic iterator takes the fused block iterator
   with its vector. A block iterator class the intrinsic lacks stays outside the intrinsic
   (a batch, or a convolution's output pixels against a 1-row dot product); an intrinsic
   iterator class the block lacks means no match (a depthwise convolution has no iterator
   that indexes the output and the weights but not the data).
3. *Application* (``apply_candidate``): ``reindex`` each operand whose access is not already
   one index per fused iterator (a convolution's input becomes its im2col copy),
   ``transform_block_layout`` to the fused iterators, ``transform_layout`` of the copies to
   match, ``pad_einsum`` to multiples of the intrinsic's extents, ``transform_layout`` into the
   layout the description reads (the packed ``B[n // 8, k // 4, n % 8 * 4 + k % 4]`` of the
   int8 dot products), ``split`` / ``reorder`` so the intrinsic-sized loops are innermost, in
   the description's order, ``blockize`` them and ``tensorize``. ``to_fused_form`` makes the
   steps before ``split`` alone (the Tensor Core sketch rule tiles the fused loops itself), and
   ``operand_position`` finds the buffer playing an intrinsic's operand after them.

A candidate is listed as fitting only when this whole sequence went through on a copy of the
program and the result verifies; everything else is listed with the reason.

    >>> report = tensorize_candidates(int8_matmul, "llvm")     # an AVX2 machine
    >>> print(report)
    block C:
      fits x86_avx2_u8s8s32_dot_8x4: A=A, B=B, C=C; (vi) [64] {A, C} -> outside the intrinsic; ...
    >>> sch = tir.Schedule(int8_matmul)
    >>> outer = apply_candidate(sch, "C", report["C"].fits[0])   # tensorized; outer loops free to tile

The package: ``match.py`` finds the candidates (steps 1 and 2, the plan of step 3, and
``tensorize_candidates`` with its explanations); ``apply.py`` applies one (``apply_candidate``,
``to_fused_form``, ``operand_position``).
"""

from __future__ import annotations

from metasched.space.tensorize.apply import apply_candidate, operand_position, to_fused_form
from metasched.space.tensorize.match import (
    VALUE_RANGES_ATTR,
    BlockCandidates,
    IterGroup,
    TensorizeCandidate,
    TensorizeMismatch,
    TensorizeReport,
    index_text,
    match_intrin,
    operand_contracts,
    tensorize_candidates,
)

__all__ = [
    "VALUE_RANGES_ATTR",
    "BlockCandidates",
    "IterGroup",
    "TensorizeCandidate",
    "TensorizeMismatch",
    "TensorizeReport",
    "apply_candidate",
    "index_text",
    "match_intrin",
    "operand_contracts",
    "operand_position",
    "tensorize_candidates",
    "to_fused_form",
]
