-- case: compile_errors
SELECT o.status, e.line, e.position, e.text
FROM all_objects o
LEFT JOIN all_errors e
  ON e.owner = o.owner
 AND e.name = o.object_name
 AND e.type = o.object_type
 AND e.attribute = 'ERROR'
WHERE o.owner = :schema
  AND o.object_name = :name
  AND o.object_type = :object_type
ORDER BY e.sequence
