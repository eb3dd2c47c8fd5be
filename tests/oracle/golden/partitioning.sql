-- case: partitioning
SELECT p.partitioning_type,
       k.column_name,
       k.column_position
FROM all_part_tables p
LEFT JOIN all_part_key_columns k
  ON k.owner = p.owner
 AND k.name = p.table_name
 AND k.object_type = 'TABLE'
WHERE p.owner = :schema
  AND p.table_name = :table
ORDER BY k.column_position
