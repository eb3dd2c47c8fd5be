-- case: describe_columns
SELECT c.column_name,
       c.data_type,
       c.data_type_owner,
       c.data_length,
       c.data_precision,
       c.data_scale,
       c.char_length,
       c.char_used,
       c.nullable,
       c.column_id
FROM all_tab_columns c
WHERE c.owner = :schema
  AND c.table_name = :table
ORDER BY c.column_id
