"""Schedule primitives: parallel, vectorize, unroll, bind, annotate, unannotate."""

from __future__ import annotations


class AnnotationPrimitives:
    """Schedule methods for parallel, vectorize, unroll, bind, annotate, unannotate."""
