-- case: changelog
SELECT COUNT(*) FROM APP_H.ORDERS_LOG WHERE gl_origin = 'V'
