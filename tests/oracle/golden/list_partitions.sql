-- case: list_partitions
SELECT p.partition_name,
       p.partition_position,
       p.high_value
FROM all_tab_partitions p
WHERE p.table_owner = :schema
  AND p.table_name = :table
ORDER BY p.partition_position
