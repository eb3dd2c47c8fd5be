-- case: compatible
SELECT value
FROM v$parameter
WHERE name = 'compatible'
