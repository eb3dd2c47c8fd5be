-- case: unique_keys
SELECT k.constraint_name AS index_id,
       cc.column_name,
       cc.position
FROM all_constraints k
JOIN all_cons_columns cc
  ON cc.owner = k.owner
 AND cc.constraint_name = k.constraint_name
 AND cc.table_name = k.table_name
WHERE k.constraint_type IN ('P', 'U')
  AND k.status = 'ENABLED'
  AND k.owner = :schema
  AND k.table_name = :table
ORDER BY k.constraint_name, cc.position
