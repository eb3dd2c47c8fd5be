-- case: find_table
SELECT t.owner AS table_schema,
       t.table_name,
       t.dependencies,
       t.partitioned
FROM all_tables t
WHERE UPPER(t.owner) = UPPER(:schema)
  AND UPPER(t.table_name) = UPPER(:table)
ORDER BY t.owner, t.table_name
