-- case: one
DELETE FROM APP_H.ORDERS_LOG
WHERE gl_seq IN (:seq_0)

-- case: three
DELETE FROM APP_H.ORDERS_LOG
WHERE gl_seq IN (:seq_0, :seq_1, :seq_2)
