-- case: disabled trigger
ALTER TRIGGER APP_H.ORDERS ENABLE
