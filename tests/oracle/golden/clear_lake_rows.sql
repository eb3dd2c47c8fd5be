-- case: lake rows
DELETE FROM APP_H.ORDERS_LK
