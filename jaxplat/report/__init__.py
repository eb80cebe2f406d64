"""What people read: text tables with units, figures. The top layer beside
the command line: may import every package."""

from jaxplat.report.html import write_report
from jaxplat.report.tables import finite_or_none, format_comm_breakdown, json_text, operator_table, table

# The public names (documented, kept stable). The other names imported above serve
# this project's own modules and older scripts; new code imports them from their module.
__all__ = ["json_text", "operator_table", "table", "write_report"]
