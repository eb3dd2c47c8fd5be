-- case: find_table
SELECT t.owner AS table_schema,
       t.table_name,
       t.dependencies,
       t.partitioned
FROM all_tables t
WHERE t.owner IN (:schema, UPPER(:schema))
  AND t.table_name IN (:table, UPPER(:table))
ORDER BY t.owner, t.table_name
