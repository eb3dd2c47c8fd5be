-- case: max_string_size
SELECT value
FROM v$parameter
WHERE name = 'max_string_size'
