-- case: composite key
SELECT MIN(gl_seq)
FROM APP_H.ORDERS_LOG
WHERE gl_seq > :seq
  AND TO_CHAR(ORDER_ID) = :key_0
  AND TO_CHAR(LINE_NO) = :key_1
