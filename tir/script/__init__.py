"""Placeholder: the dialect is being written."""
