-- case: all rows
SELECT ORDER_ID, "lower_case", CAST(SYS_EXTRACT_UTC(ZONED_AT) AS TIMESTAMP(6)), gl_seq, gl_op
FROM APP_H.ORDERS_LOG
ORDER BY gl_seq

-- case: limited
SELECT ORDER_ID, "lower_case", CAST(SYS_EXTRACT_UTC(ZONED_AT) AS TIMESTAMP(6)), gl_seq, gl_op
FROM APP_H.ORDERS_LOG
ORDER BY gl_seq
FETCH FIRST :limit ROWS ONLY

-- case: named changes
SELECT ORDER_ID, "lower_case", CAST(SYS_EXTRACT_UTC(ZONED_AT) AS TIMESTAMP(6)), gl_seq, gl_op
FROM APP_H.ORDERS_LOG
WHERE gl_seq IN (12, 15)
ORDER BY gl_seq
