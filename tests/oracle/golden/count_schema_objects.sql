-- case: count_schema_objects
SELECT COUNT(*)
FROM all_objects o
WHERE o.owner = :schema
