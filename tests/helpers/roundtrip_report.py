"""pytest plugin: the round-trip summary table (template x scenario: pass / n/a / xfail).

tests/corpus/test_roundtrip.py records ``("roundtrip", (template, scenario))`` as a user property
of each test; this plugin collects the outcome of every such test from its reports and,
at the end of the session, prints the table, the reason of every n/a and xfail, and the
counts with the xfail share of applicable cases (the issue's target: at most 5%).
"""

from __future__ import annotations

from typing import Any

import pytest

SCENARIO_ABBREV = {
    "content": "cont",
    "reasoning_content": "r+c",
    "one_call": "call",
    "content_call": "c+call",
    "parallel_calls": "2call",
    "reasoning_call": "r+call",
    "complex_args": "cplx",
    "no_params": "noarg",
    "pydantic_call": "pydan",
    "openai_ids": "oa-id",
}

_RESULTS: dict[tuple[str, str], tuple[str, str]] = {}


def _key(report: pytest.TestReport) -> tuple[str, str] | None:
    for name, value in report.user_properties:
        if name == "roundtrip":
            pair: tuple[str, str] = value  # type: ignore[assignment]
            return str(pair[0]), str(pair[1])
    return None


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr: Any = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ").removeprefix("n/a: ")
    return str(longrepr)


def _fail_reason(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    message = crash.message if crash is not None else str(report.longrepr)
    return message.splitlines()[0][:200] if message else "failed"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    key = _key(report)
    if key is None:
        return
    if report.when == "call" or (report.when == "setup" and not report.passed):
        strict_xpass = report.failed and str(report.longrepr).startswith("[XPASS(strict)]")
        if hasattr(report, "wasxfail"):
            status = "xfail" if report.skipped else "XPASS"
            reason = report.wasxfail.removeprefix("reason: ")
        elif strict_xpass:
            status = "XPASS"
            reason = str(report.longrepr).removeprefix("[XPASS(strict)]").strip()
        elif report.skipped:
            status, reason = "n/a", _skip_reason(report)
        elif report.failed:
            status, reason = "FAIL", _fail_reason(report)
        else:
            status, reason = "pass", ""
        _RESULTS[key] = (status, reason)


def summary_lines(results: dict[tuple[str, str], tuple[str, str]]) -> list[str]:
    """The table, the reasons and the counts, as text lines."""
    scenarios = list(SCENARIO_ABBREV)
    templates = sorted({t for t, _ in results})
    width = max([len(t) for t in templates] + [8])
    header = f"{'template':<{width}} " + " ".join(f"{SCENARIO_ABBREV[s]:>6}" for s in scenarios)
    lines = [header, "-" * len(header)]
    for template in templates:
        cells = []
        for scenario in scenarios:
            status = results.get((template, scenario), ("", ""))[0]
            cells.append(f"{status:>6}")
        lines.append(f"{template:<{width}} " + " ".join(cells))
    for label in ("FAIL", "XPASS", "xfail", "n/a"):
        entries = sorted(
            (t, s, reason) for (t, s), (status, reason) in results.items() if status == label
        )
        if entries:
            lines.append("")
            lines.append(f"{label} ({len(entries)}):")
            lines.extend(f"  {t} / {s}: {reason}" for t, s, reason in entries)
    counts = {label: 0 for label in ("pass", "n/a", "xfail", "FAIL", "XPASS")}
    for status, _reason in results.values():
        counts[status] = counts.get(status, 0) + 1
    applicable = counts["pass"] + counts["xfail"] + counts["FAIL"] + counts["XPASS"]
    share = 100.0 * counts["xfail"] / applicable if applicable else 0.0
    lines.append("")
    lines.append(
        f"round trip: {counts['pass']} pass, {counts['n/a']} n/a, {counts['xfail']} xfail, "
        f"{counts['FAIL']} fail, {counts['XPASS']} xpass; "
        f"xfail {share:.1f}% of {applicable} applicable cases (target <= 5%)"
    )
    return lines


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _RESULTS:
        return
    terminalreporter.section("round-trip summary (template x scenario)")
    for line in summary_lines(_RESULTS):
        terminalreporter.write_line(line)
