"""The static HTML report (``procgrade report --html FILE``): one self-contained page with the
runs, the process-versus-outcome comparison, the calibration, and each run's timeline."""

from procgrade.engine.reporting.html_report import Report, ReportError, build_report, render_report, write_report

__all__ = ["Report", "ReportError", "build_report", "render_report", "write_report"]
