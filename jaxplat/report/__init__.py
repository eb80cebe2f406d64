"""What people read: text tables with units, figures. The top layer beside
the command line: may import every package."""

from jaxplat.report.html import write_report
from jaxplat.report.tables import format_comm_breakdown, operator_table, table

__all__ = ["format_comm_breakdown", "operator_table", "table", "write_report"]
