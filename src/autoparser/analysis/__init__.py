"""Differential template analysis: render controlled variants, diff them, find markers."""

from autoparser.analysis.model import (
    ArgumentsAnalysis,
    CallIdAnalysis,
    CallIdPosition,
    ContentAnalysis,
    ContentMode,
    FunctionAnalysis,
    ReasoningAnalysis,
    ReasoningMode,
    TemplateAnalysis,
    ToolFormat,
    ToolFormatAnalysis,
    ToolsAnalysis,
)

__all__ = [
    "ArgumentsAnalysis",
    "CallIdAnalysis",
    "CallIdPosition",
    "ContentAnalysis",
    "ContentMode",
    "FunctionAnalysis",
    "ReasoningAnalysis",
    "ReasoningMode",
    "TemplateAnalysis",
    "ToolFormat",
    "ToolFormatAnalysis",
    "ToolsAnalysis",
]
