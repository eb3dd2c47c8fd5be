-- case: object_exists
SELECT 1
FROM all_objects o
WHERE o.object_type = :object_type
  AND o.owner = :schema
  AND o.object_name = :name
UNION ALL
SELECT 1
FROM all_users u
WHERE :object_type = 'SCHEMA'
  AND u.username = :schema
