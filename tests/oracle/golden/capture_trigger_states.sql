-- case: two tables
SELECT :n0 AS n, t0.*
FROM (
SELECT t.trigger_name AS name,
       CASE t.status WHEN 'ENABLED' THEN 1 ELSE 0 END AS fires,
       CASE o.status WHEN 'VALID' THEN 1 ELSE 0 END AS valid
FROM all_triggers t
JOIN all_objects o
  ON o.owner = t.owner
 AND o.object_name = t.trigger_name
 AND o.object_type = 'TRIGGER'
WHERE t.owner = :t0_schema
  AND t.trigger_name = :t0_name
) t0
UNION ALL
SELECT :n1 AS n, t1.*
FROM (
SELECT t.trigger_name AS name,
       CASE t.status WHEN 'ENABLED' THEN 1 ELSE 0 END AS fires,
       CASE o.status WHEN 'VALID' THEN 1 ELSE 0 END AS valid
FROM all_triggers t
JOIN all_objects o
  ON o.owner = t.owner
 AND o.object_name = t.trigger_name
 AND o.object_type = 'TRIGGER'
WHERE t.owner = :t1_schema
  AND t.trigger_name = :t1_name
) t1
