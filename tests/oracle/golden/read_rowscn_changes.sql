-- case: rowscn
SELECT ORDER_ID, "lower_case", SYS_EXTRACT_UTC(ZONED_AT),
       ORA_ROWSCN AS gl_seq,
       'U' AS gl_op
FROM APP.ORDERS
WHERE ORA_ROWSCN > :since
  AND ORA_ROWSCN <= :upto
ORDER BY ORA_ROWSCN
