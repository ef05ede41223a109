"""The Schedule methods, one mixin per primitive family; each family's module holds its pure
IR -> IR functions and their precondition checks."""

from __future__ import annotations

from tir.schedule.primitives.annotate import AnnotationPrimitives
from tir.schedule.primitives.axis_separator import AxisSeparatorPrimitives
from tir.schedule.primitives.block_iters import BlockIterPrimitives
from tir.schedule.primitives.blockize import BlockizePrimitives
from tir.schedule.primitives.buffer_access import BufferAccessPrimitives
from tir.schedule.primitives.cache import CachePrimitives
from tir.schedule.primitives.cache_index import CacheIndexPrimitives
from tir.schedule.primitives.compute_location import ComputeLocationPrimitives
from tir.schedule.primitives.epilogue import EpiloguePrimitives
from tir.schedule.primitives.inline import InlinePrimitives
from tir.schedule.primitives.layout import LayoutPrimitives
from tir.schedule.primitives.loops import LoopPrimitives
from tir.schedule.primitives.merge import MergePrimitives
from tir.schedule.primitives.padding import PaddingPrimitives
from tir.schedule.primitives.partition import PartitionPrimitives
from tir.schedule.primitives.read_write_at import ReadWriteAtPrimitives
from tir.schedule.primitives.reduction import ReductionPrimitives
from tir.schedule.primitives.reindex_cache import ReindexCachePrimitives
from tir.schedule.primitives.rolling_buffer import RollingBufferPrimitives
from tir.schedule.primitives.sampling import SamplingPrimitives


class PrimitiveMixins(
    LoopPrimitives,
    AnnotationPrimitives,
    ComputeLocationPrimitives,
    InlinePrimitives,
    CachePrimitives,
    ReductionPrimitives,
    SamplingPrimitives,
    BlockizePrimitives,
    LayoutPrimitives,
    BlockIterPrimitives,
    PartitionPrimitives,
    ReindexCachePrimitives,
    BufferAccessPrimitives,
    EpiloguePrimitives,
    PaddingPrimitives,
    ReadWriteAtPrimitives,
    MergePrimitives,
    AxisSeparatorPrimitives,
    CacheIndexPrimitives,
    RollingBufferPrimitives,
):
    """All primitive families."""
