-- case: object_columns
SELECT column_name
FROM all_tab_columns
WHERE owner = :schema
  AND table_name = :name
ORDER BY column_id
