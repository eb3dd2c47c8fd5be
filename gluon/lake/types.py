"""Spark types for gluon's lake types (Spark SQL type names)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from gluon.schema import Column

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

_DECIMAL = re.compile(r"^decimal\((\d+),(\d+)\)$")


def spark_type(lake_type: str) -> DataType:
    """The pyspark type object for a lake type name."""
    from pyspark.sql import types as T

    simple: dict[str, DataType] = {
        "boolean": T.BooleanType(),
        "tinyint": T.ByteType(),
        "smallint": T.ShortType(),
        "int": T.IntegerType(),
        "bigint": T.LongType(),
        "float": T.FloatType(),
        "double": T.DoubleType(),
        "string": T.StringType(),
        "binary": T.BinaryType(),
        "date": T.DateType(),
        "timestamp_ntz": T.TimestampNTZType(),
        "timestamp": T.TimestampType(),
    }
    match = _DECIMAL.match(lake_type)
    if match:
        return T.DecimalType(int(match.group(1)), int(match.group(2)))
    return simple[lake_type]


def struct_type(columns: tuple[Column, ...] | list[Column]) -> StructType:
    """The (all nullable) Spark schema of the lake rows of ``columns``."""
    from pyspark.sql import types as T

    return T.StructType(
        [T.StructField(column.lake_name, spark_type(column.lake_type), True) for column in columns]
    )
