-- case: one run
DELETE FROM APP_H.ORDERS_LOG
WHERE gl_seq BETWEEN :low_0 AND :high_0

-- case: three runs
DELETE FROM APP_H.ORDERS_LOG
WHERE gl_seq BETWEEN :low_0 AND :high_0
   OR gl_seq BETWEEN :low_1 AND :high_1
   OR gl_seq BETWEEN :low_2 AND :high_2
