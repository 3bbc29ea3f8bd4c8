"""The one mapping between the domain records (Memory, Message, Job) and the rows and documents the
backends keep, one module per role:

* :mod:`.schema`: what is stored, one column list per record (:data:`MEMORY_RECORD`,
  :data:`MESSAGE_RECORD`, :data:`JOB_RECORD`), each column with its kind;
* :mod:`.stored_values`: how each backend keeps times, lists and objects, and vectors
  (:data:`SQLITE`, :data:`POSTGRES`, :data:`OPENSEARCH`, :data:`PLAIN_JSON`), both ways;
* :mod:`.reader`: a row or document read into its record (``*_from_row``), through a reader compiled
  from the columns;
* :mod:`.writer`: a record written as a row or document (``*_to_row``, :func:`row_from_fields`);
* :mod:`.sql`: the SQL INSERT of a record's columns and its parameters.

Every name is importable from here, the package, as the stores import them.
"""

from ...search_filter import ColumnFilter, Match, any_of, equals
from .reader import job_from_row, memory_from_row, message_from_row
from .schema import (
    JOB_COLUMNS,
    JOB_RECORD,
    MATCH_KINDS,
    MEMORY_COLUMNS,
    MEMORY_COLUMNS_WITHOUT_VECTORS,
    MEMORY_FILTERS,
    MEMORY_RECORD,
    MESSAGE_COLUMNS,
    MESSAGE_RECORD,
    SEARCHED_MEMORY_RECORD,
    Column,
)
from .sql import POSTGRES_MAX_PARAMETERS, insert_rows_statement, insert_statement, row_values
from .stored_values import (
    OPENSEARCH,
    PLAIN_JSON,
    POSTGRES,
    SQLITE,
    SQLITE_WITHOUT_VECTORS,
    Row,
    StoredValues,
    aware,
    epoch_us,
    iso,
)
from .writer import Writer, job_to_row, memory_to_row, message_to_row, row_from_fields

__all__ = [
    "POSTGRES_MAX_PARAMETERS",
    "JOB_COLUMNS",
    "JOB_RECORD",
    "MATCH_KINDS",
    "MEMORY_COLUMNS",
    "MEMORY_COLUMNS_WITHOUT_VECTORS",
    "MEMORY_FILTERS",
    "MEMORY_RECORD",
    "MESSAGE_COLUMNS",
    "MESSAGE_RECORD",
    "OPENSEARCH",
    "PLAIN_JSON",
    "POSTGRES",
    "SEARCHED_MEMORY_RECORD",
    "SQLITE",
    "SQLITE_WITHOUT_VECTORS",
    "Column",
    "ColumnFilter",
    "Match",
    "Row",
    "StoredValues",
    "Writer",
    "any_of",
    "aware",
    "epoch_us",
    "equals",
    "insert_rows_statement",
    "insert_statement",
    "iso",
    "job_from_row",
    "job_to_row",
    "memory_from_row",
    "memory_to_row",
    "message_from_row",
    "message_to_row",
    "row_from_fields",
    "row_values",
]
