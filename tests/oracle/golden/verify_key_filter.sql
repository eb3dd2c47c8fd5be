-- case: two buckets
SUBSTR(LOWER(RAWTOHEX(STANDARD_HASH(COALESCE(TO_CHAR(ORDER_ID, 'FM9999999990'), 'N') || '|' || COALESCE(TO_CHAR(LINE_NO), 'N'), 'MD5'))), 1, 3) IN (:vb0, :vb1)

-- case: integer key
BITAND(LINE_NO, 4095) IN (:vb0, :vb1)
