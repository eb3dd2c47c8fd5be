-- case: columns_with_defaults
SELECT c.column_name AS name
FROM all_tab_columns c
WHERE c.owner = :schema
  AND c.table_name = :table
  AND c.default_length IS NOT NULL
