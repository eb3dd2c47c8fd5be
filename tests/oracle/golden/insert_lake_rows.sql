-- case: lake rows
INSERT INTO APP_H.ORDERS_LK (ORDER_ID, LINE_NO, AMOUNT, ZONED_AT, NOTES, "lower_case")
VALUES (:c0, :c1, :c2, :c3, :c4, :c5)
