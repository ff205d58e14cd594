"""Differential template analysis: render controlled variants, diff them, find markers."""

from autoparser.analysis.analyzer import analyze_template, clear_cache, run_analysis
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
    "analyze_template",
    "clear_cache",
    "run_analysis",
]
