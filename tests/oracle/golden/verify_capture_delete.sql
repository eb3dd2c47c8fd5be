-- case: composite key
INSERT INTO APP_H.ORDERS_LOG (gl_seq, gl_op, gl_origin, ORDER_ID, LINE_NO)
SELECT APP_H.ORDERS_SEQ.NEXTVAL, 'D', 'T', :k0, :k1 FROM DUAL
