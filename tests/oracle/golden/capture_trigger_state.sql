-- case: capture_trigger_state
SELECT t.trigger_name AS name, CASE t.status WHEN 'ENABLED' THEN 1 ELSE 0 END AS fires
FROM all_triggers t
WHERE t.owner = :schema
  AND t.trigger_name = :name
