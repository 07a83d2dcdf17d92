"""Compression helpers used by sources: compact JSON tool results."""

from contextwright.compress.json_compact import compact_tool_result

__all__ = ["compact_tool_result"]
