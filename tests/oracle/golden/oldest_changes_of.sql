-- case: changelogs
SELECT :n0 AS n, oldest.changed_at, oldest.source_now FROM (
  SELECT SYS_EXTRACT_UTC(gl_changed_at) AS changed_at,
         SYS_EXTRACT_UTC(SYSTIMESTAMP) AS source_now
  FROM APP_H.ORDERS_LOG
  ORDER BY gl_seq
  FETCH FIRST 1 ROWS ONLY
) oldest
UNION ALL
SELECT :n1 AS n, oldest.changed_at, oldest.source_now FROM (
  SELECT SYS_EXTRACT_UTC(gl_changed_at) AS changed_at,
         SYS_EXTRACT_UTC(SYSTIMESTAMP) AS source_now
  FROM APP_H.ITEMS_LOG
  ORDER BY gl_seq
  FETCH FIRST 1 ROWS ONLY
) oldest
