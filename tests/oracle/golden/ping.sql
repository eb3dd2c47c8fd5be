-- case: ping
SELECT 1 FROM DUAL
