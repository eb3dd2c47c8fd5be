-- case: list_subpartitions
SELECT s.partition_name,
       s.subpartition_name,
       s.subpartition_position,
       s.high_value,
       t.subpartitioning_type,
       (SELECT LISTAGG(k.column_name, ',') WITHIN GROUP (ORDER BY k.column_position)
          FROM all_subpart_key_columns k
         WHERE k.owner = t.owner
           AND k.name = t.table_name
           AND k.object_type = 'TABLE') AS subpartition_columns
FROM all_part_tables t
JOIN all_tab_subpartitions s
  ON s.table_owner = t.owner
 AND s.table_name = t.table_name
WHERE t.owner = :schema
  AND t.table_name = :table
ORDER BY s.partition_name, s.subpartition_position
