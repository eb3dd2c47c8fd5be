-- case: object_marker
SELECT c.comments
FROM all_tab_comments c
WHERE :object_type IN ('TABLE', 'VIEW')
  AND c.owner = :schema
  AND c.table_name = :name
UNION ALL
SELECT s.text
FROM all_source s
WHERE :object_type = 'TRIGGER'
  AND s.owner = :schema
  AND s.name = :name
  AND s.type = 'TRIGGER'
  AND s.text LIKE '%gluon:%'
